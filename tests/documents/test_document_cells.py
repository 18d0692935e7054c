"""Documents of cells users compose fit the page too: the documents of 50 and more randomly composed cells
(tests/support/cells.py, the trust issue's generator, derandomized) compile with no line more than 1 pt too wide.
They are rendered by one process per core and compiled as one .tex file per process, a document after
another, so that pdflatex starts twice, not once per cell."""

import os
import pathlib
import subprocess
import sys

import pytest

from bptt.tests.support.printed import overfull_lines, pdflatex, side_by_side

TESTS = pathlib.Path(__file__).resolve().parents[1]  # the shared support modules
EXAMPLES = 56  # plans drawn; a few are drawn twice, and 53 distinct cells are left

RENDER = """
import pathlib, sys
sys.path.insert(0, sys.argv[1])
from bptt.tests.support.cell_plans import build
from bptt.tests.support.cells import plans
from hypothesis import HealthCheck, given, settings
from bptt.documents.render import document

drawn = []


@settings(max_examples=int(sys.argv[2]), database=None, derandomize=True, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(plans())
def collect(plan):
    drawn.append(plan)


collect()
share, shares = int(sys.argv[3]), int(sys.argv[4])
bodies, preamble = [], ""
for plan in list(dict.fromkeys(drawn))[share::shares]:
    text = document(build(plan), "tex")
    head, _, rest = text.partition("\\\\begin{document}")
    preamble = preamble or head
    bodies.append(rest.partition("\\\\end{document}")[0])
pathlib.Path(sys.argv[5]).write_text(
    preamble + "\\\\begin{document}\\n" + "\\n\\\\clearpage\\n".join(bodies) + "\\\\end{document}\\n", encoding="utf-8"
)
print(len(bodies))
"""


@pytest.mark.slow(seconds=60)  # its two processes at once
def test_documents_of_random_cells_have_no_overfull_line(tmp_path):
    shares = os.cpu_count() or 2
    files = [tmp_path / f"cells{n}.tex" for n in range(shares)]

    def render(n):
        command = [sys.executable, "-c", RENDER, str(TESTS), str(EXAMPLES), str(n), str(shares), str(files[n])]
        return subprocess.run(command, capture_output=True, text=True, timeout=900)

    runs = side_by_side(render, range(shares))
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    assert sum(int(run.stdout) for run in runs) >= 50
    logs = side_by_side(lambda tex: pdflatex(tex).log, files)
    wide = [line for log, tex in zip(logs, files, strict=True) for line in overfull_lines(log, tex)]
    wide = [line for line in wide if float(line.partition("pt")[0]) > 1]
    assert not wide, f"{len(wide)} lines over 1 pt too wide:\n" + "\n".join(wide)
