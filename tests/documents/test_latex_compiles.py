"""Every derivation compiles with pdflatex with no overfull line, and its Markdown has one equation per $$ block,
in the macros GitHub's MathJax has."""

import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from bptt.derive.models import names
from bptt.documents.linebreak import PAGE
from bptt.documents.width import width

REPO = pathlib.Path(__file__).resolve().parents[2]
ZOO = tuple(names())
EXAMPLES = ("examples/gated_rnn.py:gated_rnn", "examples/lstm.py:lstm", "examples/torch_lstm.py:lstm")
DOCUMENTS = ZOO + EXAMPLES


def bptt(*args):
    result = subprocess.run(
        [sys.executable, "-m", "bptt", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"bptt {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr}"
    return result.stdout


def side_by_side(function, items):
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return list(pool.map(function, items))


def file_stem(model):
    """examples/lstm.py:lstm -> examples_lstm_py_lstm: a file name for a model's document."""
    return re.sub(r"[^\w-]", "_", model)


RENDER = """
import pathlib, sys
from bptt.documents.render import document
from bptt.derive.models import load
folder = pathlib.Path(sys.argv[1])
for model, stem in zip(sys.argv[2::2], sys.argv[3::2]):
    loaded = load(model)
    (folder / (stem + ".tex")).write_text(document(loaded, "tex"), encoding="utf-8")
    (folder / (stem + ".md")).write_text(document(loaded, "md"), encoding="utf-8")
"""


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """{model: (its .tex, its Markdown)}, as `bptt latex MODEL` and `--format md` make them (test_cli.py runs the
    command itself): rendered by one process per core, each for its share of the models."""
    folder = tmp_path_factory.mktemp("documents")
    cores = os.cpu_count() or 2
    shares = [DOCUMENTS[k::cores] for k in range(cores)]
    commands = [
        [sys.executable, "-c", RENDER, str(folder), *(x for m in share for x in (m, file_stem(m)))] for share in shares
    ]
    runs = side_by_side(
        lambda command: subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600), commands
    )
    for run in runs:
        assert run.returncode == 0, run.stderr
    return {
        model: (folder / f"{file_stem(model)}.tex", (folder / f"{file_stem(model)}.md").read_text(encoding="utf-8"))
        for model in DOCUMENTS
    }


@pytest.fixture(scope="module")
def compiled(documents):
    """{model: the pdflatex log of its document}, compiled side by side."""
    logs = side_by_side(lambda model: pdflatex(documents[model][0]).with_suffix(".log"), DOCUMENTS)
    return {model: log.read_text(encoding="latin-1") for model, log in zip(DOCUMENTS, logs, strict=True)}


def pdflatex(tex):
    """Compile tex (a path) in its folder; the PDF's path."""
    program = shutil.which("pdflatex")
    if program is None:
        pytest.fail(
            "pdflatex is not installed: install Debian's texlive-latex-base and texlive-pictures "
            "(apt-get install texlive-latex-base texlive-pictures; CI installs them)"
        )
    result = subprocess.run(
        [program, "-interaction=nonstopmode", "-halt-on-error", tex.name],
        cwd=tex.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
    )
    errors = [line for line in result.stdout.splitlines() if line.startswith("!")]
    assert result.returncode == 0, f"pdflatex {tex.name} exited {result.returncode}: {errors}\n{result.stdout[-3000:]}"
    pdf = tex.with_suffix(".pdf")
    assert pdf.is_file() and pdf.read_bytes().startswith(b"%PDF"), f"no PDF from {tex.name}"
    return pdf


def overfull_lines(log, tex):
    """Each `Overfull \\hbox` pdflatex reported, with how much too wide and the source it came from
    (a paragraph's lines, or a display from its \\begin to the line it was detected at)."""
    source = tex.read_text(encoding="utf-8").splitlines()
    found = []
    for match in re.finditer(
        r"Overfull \\hbox \(([\d.]+)pt too wide\) (in paragraph at lines|detected at line) (\d+)(?:--(\d+))?", log
    ):
        last = int(match[4] or match[3])
        first = int(match[3])
        if match[2].startswith("detected"):
            first = max(n for n in range(1, last + 1) if source[n - 1].startswith(("\\begin{equation*}", "\\begin{align*}")))
        found.append(f"{match[1]}pt too wide: " + " / ".join(source[first - 1 : last])[:300])
    return found


@pytest.mark.parametrize("model", DOCUMENTS)
def test_derivation_compiles(model, documents, compiled):
    """`bptt latex MODEL -o FILE` is a document pdflatex turns into a PDF, for the zoo and the examples."""
    tex, _ = documents[model]
    assert tex.read_text(encoding="utf-8").startswith("\\documentclass")
    assert tex.with_suffix(".pdf").read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("model", DOCUMENTS)
def test_every_line_fits_the_page(model, documents, compiled):
    """No equation and no sentence runs into the margin: pdflatex reports no overfull line."""
    overfull = overfull_lines(compiled[model], documents[model][0])
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
    overfull = overfull_lines(pdflatex(tex).with_suffix(".log").read_text(encoding="latin-1"), tex)
    assert len(overfull) == 2, overfull
    assert "x = " in overfull[0] and "Some words" in overfull[1]


def display_rows(text):
    """The rows of every display of a .tex document: one `lhs = rhs`, or the rows of its align*."""
    out = []
    for kind, body in re.findall(r"\\begin\{(equation\*|align\*)\}\n(.*?)\n\\end\{\1\}", text, re.S):
        lines = body.splitlines()
        assert (kind == "align*") == (len(lines) > 1), body
        out.append([re.sub(r"(\\displaybreak\[0\])? \\\\$", "", line) for line in lines])
    return out


def test_width_estimate_errs_wide_by_at_most_fifteen_percent(documents, tmp_path):
    """The printer packs lines with an estimate of their width. On every row of every document it is at least
    90% of pdflatex's width, which the margin between the packing budget and the page allows for, and at
    most 115%, so that lines are not broken much earlier than they need to be."""
    texts = [documents[model][0].read_text(encoding="utf-8") for model in DOCUMENTS]
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
    log = pdflatex(tex).with_suffix(".log").read_text(encoding="latin-1")
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
    tex, md = documents[model]
    blocks = markdown_blocks(md)
    assert blocks, "no $$ block"
    equations = [equation_rows(block) for block in blocks]
    for rows in equations:
        assert top_level_equals(rows[0].replace("&", "")) >= 1, f"no top-level '=': {rows[0]}"
        for row in rows:
            assert row.count(r"\left") == row.count(r"\right"), f"\\left and \\right unpaired in a row: {row}"
    assert equations == display_rows(tex.read_text(encoding="utf-8"))


# The control words the documents' Markdown uses, each one GitHub's MathJax has (TeX input, base and AMS).
MATHJAX = set(
    "Gamma Lambda alpha bar begin beta boldsymbol cdot cdots cos delta dot ell end frac gamma ge hat lambda ldots le "
    "log max mathbf min ne nmid nu odot operatorname partial pi rho sup to "
    "quad right left sigma sum tanh tau textrm tfrac theta top varphi xi".split()
)


@pytest.mark.parametrize("model", DOCUMENTS)
def test_markdown_uses_only_what_mathjax_has(model, documents):
    """No macro GitHub's MathJax lacks, and no environment but aligned (multline and split are unreliable there)."""
    _, md = documents[model]
    used = set(re.findall(r"\\([A-Za-z]+)", md))
    assert used <= MATHJAX, f"macros not known to render on GitHub: {sorted(used - MATHJAX)}"
    assert set(re.findall(r"\\begin\{([^}]*)\}", md)) <= {"aligned"}


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
    """h1, W2: a layer's number is a superscript (h^(1)_t), never part of the letter (h1_t)."""
    models = tmp_path / "layers.py"
    models.write_text(TWO_LAYERS, encoding="utf-8")
    tex = tmp_path / "layers.tex"
    assert bptt("latex", f"{models}:two_layers", "-o", tex) == ""
    text = tex.read_text(encoding="utf-8")
    assert r"{\mathbf{h}^{(1)}}_{t}" in text and r"{\mathbf{W}^{(2)}}^\top" in text
    assert r"\mathbf{h1}" not in text and r"\mathbf{W2}" not in text
    pdflatex(tex)
