"""Random cells of the model language (tests/support/cells.py) run in reverse time: each mirrored (every state
read at t+1) is derived, and its derivation, evaluated in float64, equals the oracle's reverse sweeps; and the
oracle gives the mirror on the reversed sequence the cell's own loss and gradients."""

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, assume, given, settings

from bptt.derive.bptt import derive
from bptt.derive.direction import initial_time
from bptt.derive.explicit import backward, unroll
from bptt.derive.nodes import T
from bptt.tests.derive.test_reverse_mirror import mirrored
from bptt.tests.support import oracle
from bptt.tests.support.cell_plans import VALUES, random_values
from bptt.tests.support.cells import cells

STEPS, BATCH = 3, 1
TOL = 1e-10


class Numeric(dict):
    """An environment that keeps each value it is given as floats (15 digits): a value unrolled or derived is a number
    before the next step reads it, not an expression of every earlier step's (a power of a sigmoid nested T deep)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value.evalf() if isinstance(value, (sp.Basic, sp.MatrixBase)) else value)


def derived_gradients(model, params, xs, ys, initial):
    """The derivation's gradients, the formulas evaluated on float64 values (one sequence)."""
    env = Numeric({size: sp.Integer(VALUES[size.name]) for size in model.sizes})
    env |= {p: sp.ImmutableMatrix(np.reshape(params[p.name], (len(params[p.name]), -1))) for p in model.params}
    (x,) = model.inputs
    target = model.concrete_loss().target
    for k in range(1, STEPS + 1):
        env[x(k)] = sp.ImmutableMatrix(xs[k - 1, 0][:, None])
        at = target.subs(sp.Symbol("t", integer=True), k)
        env[at] = sp.Integer(int(ys[k - 1, 0])) if ys.ndim == 2 else sp.ImmutableMatrix(ys[k - 1, 0][:, None])
    for seq in model.states:
        env[seq(initial_time(model, seq).subs(T, STEPS))] = sp.ImmutableMatrix(initial[seq.name][0][:, None])
    unroll(model, STEPS, env)
    return backward(derive(model, named="all"), STEPS, env)


def agree(got, expected):
    got, expected = np.asarray(got, np.float64).ravel(), np.asarray(expected, np.float64).ravel()
    return np.abs(got - expected).max() <= TOL * max(1.0, np.abs(expected).max())


@settings(max_examples=5, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(cells())
def test_a_random_cell_in_reverse_time(model):
    assume(not model.teacher_forcing)
    mirror = mirrored(model)
    params, xs, ys, initial = random_values(model, STEPS, BATCH, seed=0)
    ours = oracle.run(mirror, params, xs, ys, initial)
    derived = derived_gradients(mirror, params, xs, ys, initial)
    assert set(derived) == set(ours.grads)
    bad = [key for key in derived if not agree(np.array(derived[key].evalf(), dtype=float), ours.grads[key])]
    assert not bad, f"{bad} differ between the derivation and the oracle"
    forward = oracle.run(model, params, xs[::-1].copy(), ys[::-1].copy(), initial)
    assert ours.loss == pytest.approx(forward.loss, rel=TOL)
    assert all(agree(ours.grads[key], forward.grads[key]) for key in forward.grads)
