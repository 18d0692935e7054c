"""Issue 28: mean, sum, layer_norm and rms_norm in the generated code of every backend, against the oracle
(tests/support/oracle.py, which evaluates each reduction from its SymPy form over the entries and shares no code
with codegen), in float64 to 1e-12: a layer-normalised Elman cell, a GRU with RMS-normalised gates, a cell that
writes mean and sum out, one that reduces its parameters (mean(g), sum(g): values of no step or sample), and two
LSTMs whose stacked products the passes fuse (one normalised 4h pre-activation sliced into the gates, and a norm per
gate) so that a norm must read all its rows, and norms over a value of one unit (tests/support/norm_cells.py), in full
BPTT, forward mode and the truncations."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import functools
import pathlib

from test_oracle import random_problem
from test_oracle_cells import agree_in_every_truncation, generate, oracle_of_cell

from bptt.codegen.backends import BACKENDS
from bptt.derive.models import load
from bptt.tests.support.checkpoints import assert_equal_gradients, assert_same_loss, numpy_run, problem, torch_run
from bptt.tests.support.oracle import compare, run

CELLS = pathlib.Path(__file__).resolve().parents[1] / "support" / "norm_cells.py"


@functools.cache
def cell_model(cell):
    """The cell loaded once per process: every backend's module and every test of it derive from the same Model."""
    return load(f"{CELLS}:{cell}")


@functools.cache
def cell_module(cell, backend):
    """The cell's module for the backend, generated once per process (test_checkpointed_...'s runs share it)."""
    return generate(cell_model(cell), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "cell",
    [
        "layer_norm_elman",
        "rms_gru",
        "reduced",
        "lstm_sliced_norm",
        "lstm_gate_norms",
        "norm_in_gain",
        "reduced_params",
        "one_unit_norms",
    ],
)
def test_a_normalised_cell_agrees_with_the_oracle(cell, backend):
    agree_in_every_truncation(cell_model(cell), backend, expected=oracle_of_cell(f"{CELLS}:{cell}"))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("truncate", [None, ("window", 3)])
@pytest.mark.parametrize("cell", ["layer_norm_elman", "reduced_params"])
def test_checkpointed_bptt_of_a_normalised_cell_equals_full_bptt(cell, backend, truncate):
    """sigma_a and a_hat are intermediates like any other, and a reduction of parameters is computed once per call
    by every segment's passes: stored, or recomputed from a checkpoint, the gradients are full BPTT's (one slot,
    three slots)."""
    numpy_module, module = cell_module(cell, "numpy"), cell_module(cell, backend)
    values = problem(numpy_module)
    run = numpy_run if backend == "numpy" else torch_run
    loss, grads = run(module, values, truncate, None)
    for checkpoints in (1, 3):
        other_loss, other = run(module, values, truncate, checkpoints)
        assert_same_loss(loss, other_loss)
        assert_equal_gradients(grads, other, 1e-13)


@pytest.mark.parametrize("cell", ["layer_norm_elman", "rms_gru", "lstm_sliced_norm"])
def test_torch_compile_steps_of_a_normalised_cell_agree_with_the_oracle(cell):
    """torch's compile=True, its step functions (printed apart from the loops, torch/steps.py) run uncompiled."""
    model = cell_model(cell)
    module = generate(model, "torch")  # its own: _compiled is replaced below
    values = random_problem(model, seed=28)
    module._compiled = lambda step: step
    for truncate in (None, ("window", 2)):
        expected = run(model, *values, truncate)
        compare(module, model, *values, truncate, expected=expected, options={"compile": True})
