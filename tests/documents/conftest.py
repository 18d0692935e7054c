"""The documents of the zoo and of the examples, made and compiled once for the modules that read them
(test_document_layout.py, test_latex_compiles.py here; test_derivation_text.py, test_document_prose.py and
tests/readme/test_readme.py read the same sections through printed.shown), which share one xdist group
(printed.GROUP) so that one worker makes them: the zoo's .tex by `bptt latex MODEL -o FILE` (forked from the
tests' CLI server, support/cli.py; its CPU time is app/bench/latex_times.py's), while this process renders every
.tex and Markdown from the sections built once per model (printed.shown_document); each .tex compiled once."""

import concurrent.futures
import contextlib
from dataclasses import dataclass

import pytest

from bptt.tests.support import cli, markdown_read
from bptt.tests.support.printed import (
    DOCUMENTS,
    EXAMPLES,
    REPO,
    ZOO,
    Printed,
    file_stem,
    pdflatex,
    shown_document,
    side_by_side,
)


@dataclass(frozen=True)
class Document:
    """A model's document: printed (for the zoo, the file `bptt latex` wrote), its Markdown, its .tex as rendered
    from the sections."""

    printed: Printed
    md: str
    rendered: str


@pytest.fixture(scope="session")
def documents(tmp_path_factory):
    """{model: Document} for the zoo and the examples."""
    folder = tmp_path_factory.mktemp("documents")
    latex = [("latex", m, "-o", str(folder / f"{file_stem(m)}.tex")) for m in ZOO]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the server runs one invocation at a time
        runs = pool.submit(lambda: [cli.bptt(*args) for args in latex])
        with contextlib.chdir(REPO):  # the examples are named by their path in the checkout, as a user runs them
            texts = {m: (shown_document(m, "tex"), shown_document(m, "md")) for m in DOCUMENTS}
    for run in runs.result():
        assert run.returncode == 0, run.stderr[-3000:]
    for model in EXAMPLES:
        (folder / f"{file_stem(model)}.tex").write_text(texts[model][0], encoding="utf-8")
    printed = side_by_side(lambda m: pdflatex(folder / f"{file_stem(m)}.tex", measure=True), DOCUMENTS)
    return {
        model: Document(done, texts[model][1], texts[model][0]) for model, done in zip(DOCUMENTS, printed, strict=True)
    }


@pytest.fixture(scope="session")
def markdown_reader():
    """markdown_read.reader(): Markdown read by KaTeX and CommonMark (skips without Node.js's packages)."""
    return markdown_read.reader()
