"""The zoo's documents as a student prints them: `bptt latex MODEL` takes under 3 s of CPU, the PDF has at
most 8 pages, forward mode is at most a quarter of it (measured on the pages, from where pdflatex sets the
section's title to the end), and every document draws the unrolled computation."""

import re
import resource
import shutil
import subprocess
import sys

import pytest

from bptt.derive.models import names

ZOO = tuple(names())
PAGE_HEIGHT = 845.04  # a4, in points
# Given on pdflatex's command line before the document: where each \label (every section's title has one) and
# the end of the document are set, written to the .aux file as \bpttat{name}{page}{height from the page's foot}.
MEASURE = (
    r"\makeatletter\def\bpttat#1#2#3{}\def\bpttmark#1{\pdfsavepos\write\@auxout{\string\bpttat{#1}{\thepage}"
    r"{\the\pdflastypos}}}\AtBeginDocument{\let\bpttlabel\label\renewcommand\label[1]{\bpttlabel{#1}\bpttmark{#1}}}"
    r"\AtEndDocument{\par\bpttmark{end}}\makeatother"
)


def cli(*args):
    """Run `bptt ARGS`; (exit status, stdout, stderr, CPU seconds of the process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run([sys.executable, "-m", "bptt", *args], capture_output=True, text=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return run.returncode, run.stdout, run.stderr, cpu


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """{model: (CPU seconds of `bptt latex MODEL -o FILE`, its pdflatex log, {label: (page, points from the foot)})}."""
    program = shutil.which("pdflatex")
    if program is None:
        pytest.fail("pdflatex is not installed: apt-get install texlive-latex-base texlive-pictures")
    folder = tmp_path_factory.mktemp("printed")
    out = {}
    for model in ZOO:
        tex = folder / f"{model}.tex"
        status, _, stderr, cpu = cli("latex", model, "-o", tex)
        assert status == 0, stderr
        for _ in range(2):  # twice: the second run reads the positions the first wrote
            run = subprocess.run(
                [program, "-interaction=nonstopmode", "-halt-on-error", f"{MEASURE}\\input{{{tex.name}}}"],
                cwd=folder,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=300,
            )
            assert run.returncode == 0, run.stdout[-2000:]
        aux = tex.with_suffix(".aux").read_text(encoding="latin-1")
        marks = {
            name: (int(page), int(sp) / 65536)
            for name, page, sp in re.findall(r"\\bpttat\{(.*?)\}\{(\d+)\}\{(\d+)\}", aux)
        }
        out[model] = (cpu, tex.with_suffix(".log").read_text(encoding="latin-1"), marks)
    return out


def pages(log):
    return int(re.search(r"Output written on \S+ \((\d+) pages?", log)[1])


def position(mark):
    """A mark as pages from the top of the first page: page 3, a quarter down, is 2.25."""
    page, height = mark
    return page - 1 + (PAGE_HEIGHT - height) / PAGE_HEIGHT


@pytest.mark.parametrize("model", ZOO)
def test_latex_takes_under_three_seconds(model, printed):
    cpu, _, _ = printed[model]
    assert cpu < 3, f"bptt latex {model} took {cpu:.2f} s of CPU"


@pytest.mark.parametrize("model", ZOO)
def test_at_most_eight_pages(model, printed):
    _, log, _ = printed[model]
    assert pages(log) <= 8, f"{model}: {pages(log)} pages"


@pytest.mark.parametrize("model", ZOO)
def test_forward_mode_is_at_most_a_quarter(model, printed):
    """From the forward-mode section's title to the end of the document (the lemma it rests on included)."""
    _, log, marks = printed[model]
    assert {"model", "forward", "end"} <= set(marks), marks
    share = (position(marks["end"]) - position(marks["forward"])) / position(marks["end"])
    assert 0 < share <= 0.25, f"{model}: forward mode is {share:.0%} of the document"
    assert position(marks["model"]) < position(marks["forward"]) <= pages(log)


@pytest.mark.parametrize("model", ZOO)
def test_every_document_draws_the_unrolled_computation(model, printed, tmp_path):
    _, log, marks = printed[model]
    assert "graph" in marks
    status, md, _, _ = cli("latex", model, "--format", "md", "--sections", "graph")
    assert status == 0 and md.count("<svg") == 1 and "</svg>" in md


def test_sections_picks_sections_and_refuses_a_name_it_lacks():
    status, text, _, _ = cli("latex", "elman", "--sections", "backward,parameters")
    assert status == 0
    assert re.findall(r"\\section\*\{(.*?)\}", text) == [
        "Backpropagation through time: the state adjoints",
        "Parameter gradients",
    ]
    assert "\\documentclass" in text and "\\begin{tikzpicture}" not in text
    status, _, error, _ = cli("latex", "jordan", "--sections", "backward")
    assert status == 2 and error.count("\n") == 1 and "Traceback" not in error
    assert "no section 'backward' in the document of jordan" in error
    assert "its sections are model, graph, outputs, intermediates, forcing, parameters, flow, forward" in error


@pytest.mark.parametrize("model", ["elman", "lstm-peephole"])
def test_a_display_stays_with_its_sentence(model, tmp_path):
    """Every display ends the paragraph of the sentence that introduces it (no display starts a paragraph), and
    the document forbids a page break inside a paragraph and before a display: the two share a page."""
    tex = tmp_path / "doc.tex"
    assert cli("latex", model, "-o", tex)[0] == 0
    lines = tex.read_text(encoding="utf-8").splitlines()
    starts = [n for n, line in enumerate(lines) if line in ("\\begin{equation*}", "\\begin{align*}")]
    assert starts and all(lines[n - 1].strip() and not lines[n - 1].startswith("\\") for n in starts)
    assert all(f"\\{penalty}=10000" in lines for penalty in ("predisplaypenalty", "interlinepenalty", "clubpenalty"))
