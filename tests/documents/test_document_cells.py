"""Documents of cells users compose fit the page too: the documents of 50 and more randomly composed cells
(tests/support/cells.py, the trust issue's generator, derandomized) compile with no line more than 1 pt too wide.
They are rendered in the test's process, which has already imported what they need, and compiled as one .tex file
per core, a document after another, so that pdflatex starts twice, not once per cell."""

import os

import pytest
from hypothesis import HealthCheck, given, settings

from bptt.documents.render import document
from bptt.tests.support.cell_plans import build
from bptt.tests.support.cells import plans
from bptt.tests.support.printed import overfull_lines, pdflatex, side_by_side

EXAMPLES = 56  # plans drawn; a few are drawn twice, and 50 distinct cells are left
# Compiled from text, the collecting function has no source that hypothesis can read: its derandomized draws are
# seeded by its name and signature alone, as when it ran in a child process (`python -c`), so the cells stay those.
DRAW = """
@settings(max_examples=examples, database=None, derandomize=True, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(plans())
def collect(plan):
    drawn.append(plan)
"""


def drawn_plans():
    """The distinct plans of EXAMPLES draws, in the order drawn."""
    scope = {"settings": settings, "given": given, "HealthCheck": HealthCheck, "plans": plans}
    scope |= {"examples": EXAMPLES, "drawn": []}
    exec(compile(DRAW, "<cell plans>", "exec"), scope)
    scope["collect"]()
    return list(dict.fromkeys(scope["drawn"]))


def combined(texts):
    """One .tex of several documents with the same preamble: their bodies one after another, a page apart."""
    preamble = texts[0].partition("\\begin{document}")[0]
    bodies = [text.partition("\\begin{document}")[2].partition("\\end{document}")[0] for text in texts]
    assert all(text.startswith(preamble) for text in texts)
    return preamble + "\\begin{document}\n" + "\n\\clearpage\n".join(bodies) + "\\end{document}\n"


@pytest.mark.slow(seconds=60)  # 50 documents rendered, then two pdflatex runs at once
def test_documents_of_random_cells_have_no_overfull_line(tmp_path):
    found = drawn_plans()
    assert len(found) >= 50
    texts = [document(build(plan), "tex") for plan in found]
    shares = os.cpu_count() or 2
    files = [tmp_path / f"cells{n}.tex" for n in range(shares)]
    for n, tex in enumerate(files):
        tex.write_text(combined(texts[n::shares]), encoding="utf-8")
    logs = side_by_side(lambda tex: pdflatex(tex).log, files)
    wide = [line for log, tex in zip(logs, files, strict=True) for line in overfull_lines(log, tex)]
    wide = [line for line in wide if float(line.partition("pt")[0]) > 1]
    assert not wide, f"{len(wide)} lines over 1 pt too wide:\n" + "\n".join(wide)
