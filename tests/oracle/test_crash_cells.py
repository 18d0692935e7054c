"""The cells of crash_cells.py (each crashed codegen once) through every backend against the oracle:
outputs, loss and every gradient to 1e-12, full BPTT, window 2 and chunk 2, and forward mode (full);
the gradients that are zero come out exactly zero. XLA's compile time dominates (a few seconds a cell),
so each cell is one test that is marked slow (handed out first)."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import numpy as np
from test_oracle import SIZES, random_problem
from test_oracle_cells import backend_failures

from bptt.documents.latex import latex
from bptt.documents.render import document
from bptt.tests.support import crash_cells
from bptt.tests.support.crash_cells import CELLS, ZERO
from bptt.tests.support.oracle import _framework, run


def _forward_mode_failures(module, model, params, xs, ys, initial, expected):
    """forward_mode_grads against the oracle's full-BPTT gradients (expected, the same for every backend)."""
    to_framework, to_numpy = _framework(module)
    ours = {name: to_framework(array) for name, array in params.items()}
    states = {f"{name}0": to_framework(value) for name, value in initial.items()}
    _, grads = module.forward_mode_grads(ours, to_framework(xs), to_framework(ys), **states)
    failures = []
    for key, value in expected.items():
        error = np.abs(to_numpy(grads[key]) - value).max() / max(1.0, np.abs(value).max())
        if not error <= 1e-12:
            failures.append(f"forward mode: gradient {key} differs from the oracle by {error:.3e}")
    return failures


def _zero_failures(module, model, params, xs, ys, initial, zero):
    to_framework, to_numpy = _framework(module)
    ours = {name: to_framework(array) for name, array in params.items()}
    states = {f"{name}0": to_framework(value) for name, value in initial.items()}
    _, grads = module.loss_and_grads(ours, to_framework(xs), to_framework(ys), **states)
    return [f"gradient {key} is not exactly zero" for key in zero if np.any(to_numpy(grads[key]) != 0)]


def _draw_failures(module, model, params, xs, ys, initial):
    """random_inputs draws inputs and targets of the problem's shapes (x with 2d rows: 2d columns)."""
    _, to_numpy = _framework(module)
    if module.__name__.endswith("_jax"):
        import jax

        rng = jax.random.key(0)
    else:
        rng = None if module.__name__.endswith("_torch") else np.random.default_rng(0)
    sizes = {symbol.name: SIZES[symbol.name] for symbol in model.sizes}
    shapes = [tuple(to_numpy(array).shape) for array in module.random_inputs(rng, 3, 2, **sizes)]
    expected = [(3, 2, *xs.shape[2:]), (3, 2, *ys.shape[2:])]
    return [] if shapes == expected else [f"random_inputs drew {shapes}, not {expected}"]


@pytest.mark.slow
@pytest.mark.parametrize("cell", CELLS)
def test_crash_cell_agrees_with_the_oracle(cell):
    model = getattr(crash_cells, cell)()
    params, xs, ys, initial = random_problem(model, seed=3)
    assert all(np.any(array != 0) for array in params.values())
    full = run(model, params, xs, ys, initial).grads  # one oracle run for every backend's forward mode

    def forward_mode(*problem):
        return _forward_mode_failures(*problem, full)

    zeros = lambda *problem: _zero_failures(*problem, ZERO[cell])  # noqa: E731
    failures = backend_failures(model, (params, xs, ys, initial), (forward_mode, zeros, _draw_failures))
    if failures:
        raise AssertionError(f"{cell}: {len(failures)} checks fail:\n" + "\n".join(failures))


@pytest.mark.parametrize("cell", CELLS)
def test_crash_cell_has_a_document(cell):
    """The derivation renders; a zero gradient and a zero Jacobian are shown as zero (bold 0)."""
    model = getattr(crash_cells, cell)()
    text = document(model).replace(" &= ", " = ")  # an equation of a display of several is aligned on its '='
    zero = [key for key in ZERO[cell] if not key.endswith("0")]
    for key in zero:
        name = latex(next(p for p in model.params if p.name == key))
        assert rf"\frac{{\partial L}}{{\partial {name}}} = \mathbf{{0}}" in text, key
    if cell in ("step_state", "unread_and_flat_gates"):  # no step reads h_{t-1} but through step
        assert "no gradient flows back through time" in text
