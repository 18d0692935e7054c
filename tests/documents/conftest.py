"""The documents of the zoo and of the examples, made and compiled once for the modules of this folder that read
them (test_document_layout.py, test_latex_compiles.py), which share one xdist group (printed.GROUP) so that one
worker makes them:
the zoo's .tex by `bptt latex MODEL -o FILE` (its CPU time measured), every Markdown, the examples' .tex and the
zoo's again from the sections built once per model, in one process per core; each .tex compiled once."""

import os
import sys
from dataclasses import dataclass

import pytest
from printed import DOCUMENTS, EXAMPLES, REPO, ZOO, Printed, file_stem, pdflatex, side_by_side, timed

RENDER = """
import pathlib, sys
from bptt.derive.models import load
from bptt.documents.document import sections
from bptt.documents.render import rendered
folder = pathlib.Path(sys.argv[1])
for model, stem in zip(sys.argv[2::2], sys.argv[3::2]):
    loaded = load(model)
    chosen = sections(loaded)
    (folder / (stem + ".rendered.tex")).write_text(rendered(loaded, chosen, "tex"), encoding="utf-8")
    (folder / (stem + ".md")).write_text(rendered(loaded, chosen, "md"), encoding="utf-8")
"""


@dataclass(frozen=True)
class Document:
    """A model's document: printed (for the zoo, the file `bptt latex` wrote), its Markdown, its .tex as rendered
    from the sections, and the CPU seconds `bptt latex MODEL -o FILE` took (the zoo only, else None)."""

    printed: Printed
    md: str
    rendered: str
    cpu: float | None


@pytest.fixture(scope="session")
def documents(tmp_path_factory):
    """{model: Document} for the zoo and the examples."""
    folder = tmp_path_factory.mktemp("documents")
    cores = os.cpu_count() or 2
    renders = [
        [sys.executable, "-c", RENDER, str(folder), *(x for m in DOCUMENTS[k::cores] for x in (m, file_stem(m)))]
        for k in range(cores)
    ]
    latex = [[sys.executable, "-m", "bptt", "latex", m, "-o", str(folder / f"{file_stem(m)}.tex")] for m in ZOO]
    runs = side_by_side(lambda command: timed(command, cwd=REPO), renders + latex)
    for status, stderr, _ in runs:
        assert status == 0, stderr[-3000:]
    cpu = dict(zip(ZOO, (seconds for _, _, seconds in runs[len(renders) :]), strict=True))
    for model in EXAMPLES:
        (folder / f"{file_stem(model)}.rendered.tex").rename(folder / f"{file_stem(model)}.tex")
    printed = side_by_side(lambda m: pdflatex(folder / f"{file_stem(m)}.tex", measure=True), DOCUMENTS)
    out = {}
    for model, done in zip(DOCUMENTS, printed, strict=True):
        stem = file_stem(model)
        again = folder / f"{stem}.rendered.tex" if model in cpu else done.tex
        md = (folder / f"{stem}.md").read_text(encoding="utf-8")
        out[model] = Document(done, md, again.read_text(encoding="utf-8"), cpu.get(model))
    return out
