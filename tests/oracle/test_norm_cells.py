"""Issue 28: mean, sum, layer_norm and rms_norm in the generated code of every backend, against the oracle
(tests/support/oracle.py, which evaluates each reduction from its SymPy form over the entries and shares no code
with codegen), in float64 to 1e-12: a layer-normalised Elman cell, a GRU with RMS-normalised gates, a cell that
writes mean and sum out, and two LSTMs whose stacked products the passes fuse (one normalised 4h pre-activation
sliced into the gates, and a norm per gate) so that a norm must read all its rows (tests/support/norm_cells.py),
in full BPTT, forward mode and the truncations."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import contextlib
import pathlib

from test_oracle import random_problem
from test_oracle_cells import TRUNCATIONS, generate

from bptt.codegen.backends import BACKENDS
from bptt.derive.models import load
from bptt.tests.support.jax_eager import eagerly
from bptt.tests.support.oracle import compare, run

CELLS = pathlib.Path(__file__).resolve().parents[1] / "support" / "norm_cells.py"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cell", ["layer_norm_elman", "rms_gru", "reduced", "lstm_sliced_norm", "lstm_gate_norms"])
def test_a_normalised_cell_agrees_with_the_oracle(cell, backend):
    model = load(f"{CELLS}:{cell}")
    problem = random_problem(model, seed=28)
    module = generate(model, backend)
    with eagerly(module) if backend == "jax" else contextlib.nullcontext():  # JAX uncompiled: seconds, not a minute
        for truncate in TRUNCATIONS.values():
            expected = run(model, *problem, truncate)
            compare(module, model, *problem, truncate, forward_mode=truncate is None, expected=expected)
