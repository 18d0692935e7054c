"""Issue 28: slices of a sequence's value, a_t[h:2h, :] (consecutive rows), as Ba et al. split a normalised 4h
pre-activation into the gates. The adjoint of the value is the stack of its slices' adjoints, zero in the rows no
slice reads. Each backend's module against the oracle (tests/support/oracle.py, which evaluates the slice from its
equation and shares no code with codegen): gates sliced from one intermediate, and a state read by slices (the next
step reads its first rows, the head its last), in full BPTT, forward mode and the truncations."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import pathlib

from test_oracle_cells import agree_in_every_truncation, oracle_of_cell

from bptt.codegen.backends import BACKENDS
from bptt.derive.models import load

CELLS = pathlib.Path(__file__).resolve().parents[1] / "support" / "paper_cells.py"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cell", ["sliced_gates", "sliced_state"])
def test_a_cell_that_reads_slices_of_a_value_agrees_with_the_oracle(cell, backend):
    spec = f"{CELLS}:{cell}"  # the oracle runs once per cell: the same numbers for each backend's module
    agree_in_every_truncation(load(spec), backend, expected=oracle_of_cell(spec))
