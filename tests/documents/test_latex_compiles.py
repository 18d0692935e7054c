"""Every derivation compiles with pdflatex with no overfull line, and its Markdown has one equation per $$ block,
in the macros GitHub's MathJax has. The zoo's and the examples' documents are made and compiled once
(conftest.py)."""

import re
import textwrap

import pytest

from bptt.documents.linebreak import PAGE
from bptt.documents.width import width
from bptt.tests.support.markdown_read import display_maths, errors, inline_maths
from bptt.tests.support.printed import DOCUMENTS, GROUP, bptt, display_rows, overfull_lines, pdflatex

XDIST_GROUP = GROUP


@pytest.mark.parametrize("model", DOCUMENTS)
def test_derivation_compiles(model, documents):
    """`bptt latex MODEL -o FILE` is a document pdflatex turns into a PDF, for the zoo and the examples."""
    tex = documents[model].printed.tex
    assert tex.read_text(encoding="utf-8").startswith("\\documentclass")
    assert tex.with_suffix(".pdf").read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("model", DOCUMENTS)
def test_every_line_fits_the_page(model, documents):
    """No equation and no sentence runs into the margin: pdflatex reports no overfull line."""
    printed = documents[model].printed
    overfull = overfull_lines(printed.log, printed.tex)
    assert not overfull, f"{len(overfull)} overfull lines:\n" + "\n".join(overfull)


def test_an_overfull_line_is_caught(tmp_path):
    """The check above reads pdflatex's log right: a display and a sentence made too wide are both reported."""
    long_sum = " + ".join(
        rf"\mathbf{{W}}_\textrm{{{n}}}^\top \frac{{\partial L}}{{\partial \mathbf{{h}}_{{t+1}}}}" for n in range(12)
    )
    glued = r"\left(" + long_sum + r"\right)"
    tex = tmp_path / "wide.tex"
    tex.write_text(
        "\\documentclass[11pt]{article}\\usepackage[a4paper,margin=2cm]{geometry}\\usepackage{amsmath}"
        f"\\begin{{document}}\n\\begin{{equation*}}\nx = {long_sum}\n\\end{{equation*}}\n"
        f"Some words and then ${glued}$ in a sentence.\n\\end{{document}}\n",
        encoding="utf-8",
    )
    overfull = overfull_lines(pdflatex(tex).log, tex)
    assert len(overfull) == 2, overfull
    assert "x = " in overfull[0] and "Some words" in overfull[1]


def test_width_estimate_errs_wide_by_at_most_fifteen_percent(documents, tmp_path):
    """The printer packs lines with an estimate of their width. On every row of every document it is at least
    90% of pdflatex's width, which the margin between the packing budget and the page allows for, and at
    most 115%, so that lines are not broken much earlier than they need to be."""
    texts = [documents[model].printed.tex.read_text(encoding="utf-8") for model in DOCUMENTS]
    rows = sorted({row.replace("&", "") for text in texts for display in display_rows(text) for row in display})
    measures = "\n".join(
        rf"\settowidth{{\w}}{{$\displaystyle {row}$}}\typeout{{ROW {n}: \the\w}}" for n, row in enumerate(rows)
    )
    tex = tmp_path / "widths.tex"
    tex.write_text(
        "\\documentclass[11pt]{article}\\usepackage{amsmath,amssymb}\\newlength{\\w}\\begin{document}\n"
        f"{measures}\nx\n\\end{{document}}\n",
        encoding="utf-8",
    )
    log = pdflatex(tex).log
    real = {int(n): float(points) for n, points in re.findall(r"ROW (\d+): ([\d.]+)pt", log)}
    assert len(real) == len(rows) > 100
    off = [
        (round(width(row) / real[n], 3), row)
        for n, row in enumerate(rows)
        if real[n] > 30 and not 0.9 <= width(row) / real[n] <= 1.15
    ]
    assert not off, f"estimate / pdflatex out of [0.9, 1.15]: {off[:5]}"
    assert max(real.values()) < PAGE


# A user's model whose title or source is plain text with characters TeX treats specially.
USER_MODEL = textwrap.dedent(
    """
    from bptt.derive.model import Model, matrix, sequence, sizes
    from bptt.derive.nodes import GenericLoss, t


    def make(title="Linear RNN", source="a test"):
        d, h, q = sizes("d h q")
        W_hx, W_hh, W_qh = matrix("W_hx", h, d), matrix("W_hh", h, h), matrix("W_qh", q, h)
        x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
        o, y = sequence("o", q, "output"), sequence("y", q, "target")
        return Model(
            name="special-rnn",
            title=title,
            source=source,
            sizes=(d, h, q),
            params=(W_hx, W_hh, W_qh),
            inputs=(x,),
            steps=((hidden, W_hx * x() + W_hh * hidden(t - 1)),),
            outputs=((o, W_qh * hidden()),),
            loss=GenericLoss(o(), y()),
        )


    def title():
        return make(title="R&D's RNN: 100% linear, #1, snake_case {braces}")


    def source():
        return make(source="https://d2l.ai/chapter_recurrent-neural-networks/bptt.html#1 (100% & more)")
    """
)


@pytest.mark.parametrize("field", ["title", "source"])
def test_plain_text_with_tex_special_characters_compiles(field, tmp_path):
    """A model's title and source are plain text: & % # _ { } in them do not break the document."""
    models = tmp_path / "special_models.py"
    models.write_text(USER_MODEL, encoding="utf-8")
    tex = tmp_path / "special.tex"
    assert bptt("latex", f"{models}:{field}", "-o", tex) == ""
    pdflatex(tex)


def top_level_equals(equation):
    """How many '=' stand outside every {...} group (t=1 in \\sum_{t=1} does not count)."""
    depth = count = 0
    for char in re.sub(r"\\[{}]", "", equation):
        depth += {"{": 1, "}": -1}.get(char, 0)
        count += char == "=" and depth == 0
    return count


def markdown_blocks(text):
    """The contents of the $$ blocks of a Markdown document, each a list of lines."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.strip() == "$$":
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        else:
            assert "$$" not in line, f"$$ not on a line of its own: {line!r}"
            if current is not None:
                current.append(line)
    assert current is None, "a $$ block is never closed"
    return blocks


def equation_rows(block):
    """The rows of the equations in a $$ block: its one line, or the rows of its aligned environment, each
    equation's first row aligned on its '=', its continuation rows starting at the alignment point."""
    if len(block) == 1:
        assert "\\\\" not in block[0] and "&" not in block[0], f"a one-line equation with rows or columns: {block[0]}"
        return block
    assert block[0] == r"\begin{aligned}" and block[-1] == r"\end{aligned}", f"not one aligned environment: {block}"
    rows = block[1:-1]
    assert all(row.endswith(r" \\") for row in rows[:-1]), f"a row not ended by \\\\ and a new line: {rows}"
    assert not rows[-1].endswith("\\\\"), f"an empty last row: {rows}"
    rows = [row.removesuffix(r" \\") for row in rows]
    assert all(row.count("&") == 1 for row in rows), f"not one alignment point a row: {rows}"
    assert "&= " in rows[0] and all(row.startswith("&") or "&= " in row for row in rows[1:]), f"not aligned: {rows}"
    return rows


@pytest.mark.parametrize("model", DOCUMENTS)
def test_markdown_blocks_hold_one_equation_each(model, documents):
    """$$ blocks are balanced; each holds the equations of one display, each with a top-level '=': one line, or an
    aligned environment a row a line, aligned on the '=', every row's \\left and \\right paired; the same rows
    as the LaTeX's displays."""
    document = documents[model]
    blocks = markdown_blocks(document.md)
    assert blocks, "no $$ block"
    equations = [equation_rows(block) for block in blocks]
    for rows in equations:
        assert top_level_equals(rows[0].replace("&", "")) >= 1, f"no top-level '=': {rows[0]}"
        for row in rows:
            assert row.count(r"\left") == row.count(r"\right"), f"\\left and \\right unpaired in a row: {row}"
    assert equations == display_rows(document.printed.tex.read_text(encoding="utf-8"))


# The control words the documents' Markdown uses, each one GitHub's MathJax has (TeX input, base and AMS).
MATHJAX = set(
    "Gamma Lambda alpha bar begin beta boldsymbol cdot cdots cos delta dot ell end frac gamma ge hat lambda ldots le "
    "log max mathbf min ne nmid nu odot operatorname partial pi rho sup to "
    "quad right left sigma sum tanh tau textrm tfrac theta top varphi xi "
    "Delta Phi nabla otimes qquad tilde times zeta omega mu epsilon sqrt".split()
)


@pytest.mark.parametrize("model", DOCUMENTS)
def test_markdown_uses_only_what_mathjax_has(model, documents):
    """No macro GitHub's MathJax lacks, and no environment but aligned and bmatrix (a vector stacked from its
    slices' adjoints; both in MathJax's AMS and KaTeX; multline and split are unreliable there)."""
    md = documents[model].md
    used = set(re.findall(r"\\([A-Za-z]+)", md))
    assert used <= MATHJAX, f"macros not known to render on GitHub: {sorted(used - MATHJAX)}"
    assert set(re.findall(r"\\begin\{([^}]*)\}", md)) <= {"aligned", "bmatrix"}


def test_markdown_maths_renders_with_katex(documents, markdown_reader):
    """Every $$ block and inline $...$ of the zoo's and the examples' Markdown renders with KaTeX, which refuses
    what it cannot typeset (throwOnError), in one Node.js process."""
    formulas = sorted(
        {f for model in DOCUMENTS for f in display_maths(documents[model].md) + inline_maths(documents[model].md)}
    )
    assert len(formulas) > 500
    refused = errors(formulas, markdown_reader(formulas, [])[0])
    assert not refused, f"{len(refused)} formulas KaTeX refuses: {refused[:3]}"


TWO_LAYERS = textwrap.dedent(
    """
    from bptt.derive.model import Model, matrix, sequence, sizes
    from bptt.derive.nodes import SquaredError, t, tanh


    def two_layers():
        d, h, q = sizes("d h q")
        W1, U1, W2, U2, V = (matrix(n, h, k) for n, k in (("W1", h), ("U1", d), ("W2", h), ("U2", h), ("V", h)))
        x, h1, h2 = sequence("x", d, "input"), sequence("h1", h, "state"), sequence("h2", h, "state")
        o, y = sequence("o", q, "output"), sequence("y", q, "target")
        return Model(
            name="two-layers",
            title="Two stacked Elman layers",
            source="a test",
            sizes=(d, h, q),
            params=(W1, U1, W2, U2, matrix("V", q, h)),
            inputs=(x,),
            steps=((h1, tanh(W1 * h1(t - 1) + U1 * x())), (h2, tanh(W2 * h2(t - 1) + U2 * h1()))),
            outputs=((o, matrix("V", q, h) * h2()),),
            loss=SquaredError(o(), y()),
        )
    """
)


def test_layer_numbers_print_as_superscripts_and_compile(tmp_path):
    """h1, W2: a layer's number is a superscript (h^(1)_t), never part of the letter (h1_t); the document of these
    stacked layers (a user's cell) fits the page."""
    models = tmp_path / "layers.py"
    models.write_text(TWO_LAYERS, encoding="utf-8")
    tex = tmp_path / "layers.tex"
    assert bptt("latex", f"{models}:two_layers", "-o", tex) == ""
    text = tex.read_text(encoding="utf-8")
    assert r"{\mathbf{h}^{(1)}}_{t}" in text and r"{\mathbf{W}^{(2)}}^\top" in text
    assert r"\mathbf{h1}" not in text and r"\mathbf{W2}" not in text
    overfull = overfull_lines(pdflatex(tex).log, tex)
    assert not overfull, f"{len(overfull)} overfull lines:\n" + "\n".join(overfull)
