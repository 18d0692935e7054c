"""Documents as a student prints them: rendered by `bptt latex`, compiled by pdflatex once,
with the page and height at which each section starts; the helpers the document tests share."""

import atexit
import collections
import concurrent.futures
import functools
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass

import pytest

from bptt.derive.models import load, names
from bptt.documents.document import sections
from bptt.documents.render import rendered
from bptt.tests.support import cli

REPO = pathlib.Path(__file__).resolve().parents[2]
ZOO = tuple(names())
EXAMPLES = (
    "examples/gated_rnn.py:gated_rnn",
    "examples/lstm.py:lstm",
    "examples/torch_lstm.py:lstm",
    "examples/lstm_2layer.py:lstm",
    "examples/lstm_two_chains.py:lstm",
    "examples/birnn.py:birnn",
    "examples/birnn.py:two_layers",
)
DOCUMENTS = ZOO + EXAMPLES
# the xdist group (a module's XDIST_GROUP) of the modules that read them, printed or in-process (shown())
GROUP = "printed documents"
PAGE_HEIGHT = 845.04  # a4, in points
# Given on pdflatex's command line before the document: where each \label (every section's title has one) and
# the end of the document are set, written to the .aux file as \bpttat{name}{page}{height from the page's foot}.
# One run is enough: the documents hold no reference, so a second run sets every page the same.
MEASURE = (
    r"\makeatletter\def\bpttat#1#2#3{}\def\bpttmark#1{\pdfsavepos\write\@auxout{\string\bpttat{#1}{\thepage}"
    r"{\the\pdflastypos}}}\AtBeginDocument{\let\bpttlabel\label\renewcommand\label[1]{\bpttlabel{#1}\bpttmark{#1}}}"
    r"\AtEndDocument{\par\bpttmark{end}}\makeatother"
)


@functools.cache
def loaded(model):
    """load(model), once per test process: an example's file is run once, not once per document read."""
    return load(model)


@functools.cache
def shown(model, only=None):
    """The sections of a model's document (document.sections), built once per test process: a document is a
    function of its model, and several test modules (sharing the xdist group GROUP) read the same ones."""
    return sections(loaded(model), only)


@functools.cache
def shown_document(model, fmt="tex", only=None):
    """A model's document as render.document(load(model), fmt, only) prints it, from the sections of shown()."""
    return rendered(loaded(model), shown(model, only), fmt, only)


@dataclass(frozen=True)
class Printed:
    """A document compiled: its .tex, pdflatex's log, and {label: (page, points from the page's foot)}."""

    tex: pathlib.Path
    log: str
    marks: dict

    @property
    def pages(self):
        return int(re.search(r"Output written on \S+ \((\d+) pages?", self.log)[1])

    def position(self, label):
        """Where a label is set, in pages from the top of the first page: page 3, a quarter down, is 2.25."""
        page, height = self.marks[label]
        return page - 1 + (PAGE_HEIGHT - height) / PAGE_HEIGHT


def side_by_side(function, items):
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return list(pool.map(function, items))


def file_stem(model):
    """examples/lstm.py:lstm -> examples_lstm_py_lstm: a file name for a model's document."""
    return re.sub(r"[^\w-]", "_", model)


def pdflatex(tex, measure=False):
    """Compile tex (a path) in its folder, once (measure: with MEASURE before it); the Printed document. From the
    second document with the same preamble on, on a format holding that preamble (formatted()): the same pages."""
    program = _program()
    head, begin, body = tex.read_text(encoding="utf-8").partition("\\begin{document}")
    fmt = formatted(head) if begin else None
    options, name = [], tex.name
    if fmt is not None:  # the body alone, its lines where they were (pdflatex's log names them), on the format
        name = f"{tex.stem}-body.tex"
        (tex.parent / name).write_text("%\n" * head.count("\n") + begin + body, encoding="utf-8")
        options = [f"-fmt={fmt}", f"-jobname={tex.stem}"]
    source = (MEASURE if measure else "") + f"\\input{{{name}}}"  # the job is named by -jobname, or the first file
    result = subprocess.run(
        [program, *options, "-interaction=nonstopmode", "-halt-on-error", source],
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
    aux = tex.with_suffix(".aux")
    found = re.findall(
        r"\\bpttat\{(.*?)\}\{(\d+)\}\{(\d+)\}", aux.read_text(encoding="latin-1") if aux.exists() else ""
    )
    marks = {name: (int(page), int(sp) / 65536) for name, page, sp in found}
    return Printed(tex, tex.with_suffix(".log").read_text(encoding="latin-1"), marks)


def _program():
    program = shutil.which("pdflatex")
    if program is None:
        pytest.fail(
            "pdflatex is not installed: install Debian's texlive-latex-base and texlive-pictures "
            "(apt-get install texlive-latex-base texlive-pictures; CI installs them)"
        )
    return program


_PREAMBLES = collections.Counter()
_FORMATTING = threading.Lock()


def formatted(preamble):
    """The path (without .fmt) of a pdflatex format holding a preamble (the class and packages loaded: TikZ takes
    about 0.3 s of CPU to load), made in a folder of its own the second time the preamble is compiled; None the
    first time (a preamble compiled once costs no format)."""
    with _FORMATTING:
        _PREAMBLES[preamble] += 1
        return _format(preamble) if _PREAMBLES[preamble] > 1 else None


@functools.cache
def _format(preamble):
    folder = pathlib.Path(tempfile.mkdtemp(prefix="bptt-format-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / "preamble.tex").write_text(preamble, encoding="utf-8")
    result = subprocess.run(
        [
            _program(),
            "-ini",
            "-interaction=nonstopmode",
            "-halt-on-error",
            "-jobname=preamble",
            "&pdflatex",
            "\\input{preamble.tex}\\dump",
        ],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
    )
    assert result.returncode == 0, f"pdflatex -ini of a preamble exited {result.returncode}\n{result.stdout[-3000:]}"
    return folder / "preamble"


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
            first = max(
                n for n in range(1, last + 1) if source[n - 1].startswith(("\\begin{equation*}", "\\begin{align*}"))
            )
        found.append(f"{match[1]}pt too wide: " + " / ".join(source[first - 1 : last])[:300])
    return found


def display_rows(text):
    """The rows of every display of a .tex document: one `lhs = rhs`, or the rows of its align*."""
    out = []
    for kind, body in re.findall(r"\\begin\{(equation\*|align\*)\}\n(.*?)\n\\end\{\1\}", text, re.S):
        lines = body.splitlines()
        assert (kind == "align*") == (len(lines) > 1), body
        out.append([re.sub(r"(\\displaybreak\[0\])? \\\\$", "", line) for line in lines])
    return out


def bptt(*args):
    """`bptt ARGS` run from the repository (forked from the process that has loaded the CLI: support/cli.py); its
    stdout, asserting it succeeded."""
    result = cli.bptt(*args)
    assert result.returncode == 0, f"bptt {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr}"
    return result.stdout
