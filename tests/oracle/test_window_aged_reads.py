"""An adjoint with an age axis only because a flow from step t + 1 reads it (dL/dr1_bar_t, read by dL/dc1_{t-1})
holds its values at age 0; an adjoint without an age axis that reads it at t (dL/dz1_t = diag(c1_{t-1}) K^T
dL/dr1_bar_t) reads that age (printing/window.py). The random cells found it (NumPy and torch failed to broadcast
(T, B, h) with (T, ages, B, h) in a window)."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

from test_random_cells import check_random_cell

from bptt.tests.support.cell_plans import Gate, Layer, Plan, Term, Update

GATES = (
    Gate("z1", "relu", (Term("recurrent", source="c1"), Term("input")), named=True),
    Gate("r1", "softsign", (Term("bias"), Term("product", "c1", "z1"), Term("recurrent", source="c1")), named=True),
)
UPDATES = (
    Update("c1", "activation", activation="step", terms=(Term("reset", "h1", "z1"), Term("recurrent", source="c1"))),
    Update("h1", "output", ("r1",), activation="softsign"),
)
PLAN = Plan((Layer(1, ("c1", "h1"), False, GATES, UPDATES),), "squared", False, False, True)


@pytest.mark.parametrize("truncate", [("window", 2), ("window", 1)], ids=["window2", "window1"])
def test_an_adjoint_aged_for_a_flow_is_read_at_age_zero(truncate):
    """Every backend against the oracle in full BPTT and the window (JAX in one of the two, by the seed)."""
    check_random_cell(PLAN, 4, truncate, 12)
    check_random_cell(PLAN, 4, truncate, 13)
