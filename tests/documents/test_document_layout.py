"""The zoo's documents as a student prints them: the PDF has at most 8 pages, forward mode is at most a quarter
of it (measured on the pages, from where pdflatex sets the section's title to the end), every document draws the
unrolled computation, and a display stays with its sentence. The documents are made and compiled once
(conftest.py). How long `bptt latex MODEL` takes is measured by app/bench/latex_times.py, not here."""

import re

import pytest

from bptt.tests.support.cli import bptt
from bptt.tests.support.printed import EXAMPLES, GROUP, ZOO
from bptt.tests.support.zoo import supporting

TWO_LAYERS = "examples/lstm_2layer.py:lstm"
assert TWO_LAYERS in EXAMPLES

XDIST_GROUP = GROUP


def cli(*args):
    """Run `bptt ARGS` (forked from the process that has loaded the CLI); (exit status, stdout, stderr)."""
    run = bptt(*args)
    return run.returncode, run.stdout, run.stderr


@pytest.mark.parametrize("model", ZOO)
def test_at_most_eight_pages(model, documents):
    pages = documents[model].printed.pages
    assert pages <= 8, f"{model}: {pages} pages"


def test_a_two_layer_lstm_in_torchs_layout_is_at_most_ten_pages(documents):
    """torch.nn.LSTM(num_layers=2)'s layout, layer 2 reading h1_t in the same step: the closed form chained through
    the step in named factors, the stacked weights' gradients one line each (it fits the page: no overfull line,
    test_latex_compiles.py)."""
    pages = documents[TWO_LAYERS].printed.pages
    assert pages <= 10, f"{TWO_LAYERS}: {pages} pages"


@pytest.mark.parametrize("model", supporting("forward_mode_grads"))
def test_forward_mode_is_at_most_a_quarter(model, documents):
    """From the forward-mode section's title to the end of the lemma it rests on (the title of the section after
    them, the comparison with the source)."""
    printed = documents[model].printed
    assert {"model", "forward", "source", "end"} <= set(printed.marks), printed.marks
    share = (printed.position("source") - printed.position("forward")) / printed.position("end")
    assert 0 < share <= 0.25, f"{model}: forward mode is {share:.0%} of the document"
    assert printed.position("model") < printed.position("forward") <= printed.pages


@pytest.mark.parametrize("model", ZOO)
def test_every_document_draws_the_unrolled_computation(model, documents):
    """A TikZ picture in the PDF's graph section, and each figure of the LaTeX as an SVG in the Markdown."""
    document = documents[model]
    tex = document.printed.tex.read_text(encoding="utf-8")
    graph = tex.split("\\label{graph}", 1)[1].split("\\section*", 1)[0]
    assert "graph" in document.printed.marks and graph.count("\\begin{tikzpicture}") == 1
    figures = tex.count("\\begin{tikzpicture}")
    assert figures >= 1 and document.md.count("<svg") == document.md.count("</svg>") == figures


@pytest.mark.parametrize("model", ZOO)
def test_bptt_latex_writes_the_document_of_the_sections(model, documents):
    """The file `bptt latex MODEL -o FILE` writes is the document rendered from the model's sections."""
    document = documents[model]
    assert document.printed.tex.read_text(encoding="utf-8") == document.rendered


def test_sections_picks_sections_and_refuses_a_name_it_lacks():
    status, text, _ = cli("latex", "elman", "--sections", "backward,parameters")
    assert status == 0
    assert re.findall(r"\\section\*\{(.*?)\}", text) == [
        "Backpropagation through time: the state adjoints",
        "Parameter gradients",
    ]
    assert "\\documentclass" in text and "\\begin{tikzpicture}" not in text
    status, md, _ = cli("latex", "elman", "--format", "md", "--sections", "graph")
    assert status == 0 and md.count("<svg") == 1 and "</svg>" in md and md.count("\n## ") == 1
    status, _, error = cli("latex", "jordan", "--sections", "backward")
    assert status == 2 and error.count("\n") == 1 and "Traceback" not in error
    assert "no section 'backward' in the document of jordan" in error
    assert "its sections are model, graph, outputs, intermediates, forcing, parameters, flow, forward, source" in error


@pytest.mark.parametrize("model", ["elman", "lstm-peephole"])
def test_a_display_stays_with_its_sentence(model, documents):
    """Every display ends the paragraph of the sentence that introduces it (no display starts a paragraph), and
    the document forbids a page break inside a paragraph and before a display: the two share a page."""
    lines = documents[model].printed.tex.read_text(encoding="utf-8").splitlines()
    starts = [n for n, line in enumerate(lines) if line in ("\\begin{equation*}", "\\begin{align*}")]
    assert starts and all(lines[n - 1].strip() and not lines[n - 1].startswith("\\") for n in starts)
    assert all(f"\\{penalty}=10000" in lines for penalty in ("predisplaypenalty", "interlinepenalty", "clubpenalty"))
