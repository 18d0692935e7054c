"""Every derivation compiles with pdflatex, and its Markdown has one equation per $$ block."""

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

REPO = pathlib.Path(__file__).resolve().parents[1]
ZOO = tuple(names())


def bptt(*args):
    result = subprocess.run(
        [sys.executable, "-m", "bptt", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"bptt {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """{model: (MODEL.tex written by `bptt latex MODEL -o`, `bptt latex MODEL --format md`)}, run side by side."""
    folder = tmp_path_factory.mktemp("documents")
    runs = [(model, ("-o", folder / f"{model}.tex")) for model in ZOO] + [(model, ("--format", "md")) for model in ZOO]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        outputs = list(pool.map(lambda run: bptt("latex", run[0], *run[1]), runs))
    assert outputs[: len(ZOO)] == [""] * len(ZOO), "latex -o printed something"
    return {model: (folder / f"{model}.tex", md) for model, md in zip(ZOO, outputs[len(ZOO) :], strict=True)}


def pdflatex(tex):
    """Compile tex (a path) in its folder; the PDF's path."""
    program = shutil.which("pdflatex")
    if program is None:
        pytest.fail(
            "pdflatex is not installed: install Debian's texlive-latex-base "
            "(apt-get install texlive-latex-base; CI installs it)"
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


@pytest.mark.parametrize("model", ZOO)
def test_zoo_derivation_compiles(model, documents):
    """`bptt latex MODEL -o MODEL.tex` is a document pdflatex turns into a PDF."""
    tex, _ = documents[model]
    assert tex.read_text(encoding="utf-8").startswith("\\documentclass")
    pdflatex(tex)


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


def tex_equations(text):
    return [body.strip() for body in re.findall(r"\\begin\{equation\*\}(.*?)\\end\{equation\*\}", text, re.S)]


@pytest.mark.parametrize("model", ZOO)
def test_markdown_blocks_hold_one_equation_each(model, documents):
    """$$ blocks are balanced, each holds one equation (one line, a top-level '='), the same as the LaTeX's."""
    tex, md = documents[model]
    blocks = markdown_blocks(md)
    assert blocks, "no $$ block"
    for block in blocks:
        assert len(block) == 1 and block[0].strip(), f"not one equation on one line: {block}"
        equation = block[0]
        assert top_level_equals(equation) >= 1, f"no top-level '=': {equation}"
        assert "\\\\" not in equation and "&" not in equation, f"a multi-line display: {equation}"
    assert [block[0].strip() for block in blocks] == tex_equations(tex.read_text(encoding="utf-8"))


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
