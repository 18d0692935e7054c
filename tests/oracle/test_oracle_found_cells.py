"""The cells the oracle found wrong in the fast backward pass (tests/support/oracle_found_cells.py), through
codegen and every backend, against the oracle: outputs, loss and every gradient to 1e-12, full BPTT, window 2 and
chunk 2 (JAX's marked slow). Before the fix, NumPy and torch were wrong by 4e-2 to 1.3 in full and chunk."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import pathlib

from test_oracle import random_problem
from test_oracle_cells import TRUNCATIONS, generate

from bptt.codegen.backends import BACKENDS
from bptt.codegen.ir import Loop, walk
from bptt.codegen.program import build
from bptt.derive.models import load
from bptt.derive.nodes import SeqAt, t
from bptt.tests.support.oracle import compare

CELLS_FILE = pathlib.Path(__file__).parents[1] / "support" / "oracle_found_cells.py"
CELLS = [
    "unnamed_reset_gate",
    "unnamed_reset_gate_recurrent",
    "gate_reads_gate_times_sum",
    "gate_reads_gate_times_sum_no_bias",
    "gate_reads_gate_times_sum_identity",
    "copy_state_gate_times_sum",
    "interpolate_unnamed_reset",
]


def _cases():
    """(cell, backend) pairs; JAX's compile takes seconds per cell, so its checks are marked slow."""
    for cell in CELLS:
        for backend in BACKENDS:
            marks = [pytest.mark.slow] if backend == "jax" else []
            yield pytest.param(cell, backend, marks=marks, id=f"{cell}-{backend}")


@pytest.mark.parametrize(("cell", "backend"), _cases())
def test_found_cell_agrees_with_the_oracle(cell, backend):
    """{full, window 2, chunk 2}; the message lists each truncation that fails, with its error."""
    model = load(f"{CELLS_FILE}:{cell}")
    problem = random_problem(model, seed=3)
    module = generate(model, backend)
    failures = []
    for mode, truncate in TRUNCATIONS.items():
        try:
            compare(module, model, *problem, truncate=truncate)
        except AssertionError as error:
            failures.append(f"{mode}: {error}")
    assert not failures, f"{cell} {backend}: {len(failures)} checks fail:\n" + "\n".join(failures)


@pytest.mark.parametrize("cell", CELLS)
def test_hoisted_slopes_are_read_at_steps_they_hold(cell):
    """A slope hoisted before the loop holds steps 1..T: the loop reads it at t or t+1, never at t-1
    (step 1 would read step 0, which nothing computes)."""
    program = build(load(f"{CELLS_FILE}:{cell}"))
    hoisted = {s.target.name for s in program.adjoints.statements if isinstance(getattr(s, "target", None), SeqAt)}
    loop = next(s for s in program.adjoints.statements if isinstance(s, Loop))
    reads = [
        (node.name, node.time - t) for s in walk(loop.body) if hasattr(s, "value") for node in s.value.atoms(SeqAt)
    ]
    early = sorted({name for name, shift in reads if name in hoisted and shift == -1})
    assert hoisted and not early, f"hoisted slopes {sorted(hoisted)}; read at t-1: {early}"
