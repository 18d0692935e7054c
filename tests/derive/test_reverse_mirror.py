"""Every zoo cell run in reverse time: its mirror (each state read at t+1 where the cell reads it at t-1) on the
time-reversed sequence is the cell itself, so the mirror's derivation, evaluated on the reversed data, gives the
cell's gradients (the initial values entering at T+1 as the cell's enter at 0). The cell's derivation is proven
against brute force (test_exact.py); this carries that proof to reverse-time states of every kind of cell: several
states of one direction (LSTM's h and c), gates, one-hot inputs, a mean over steps."""

import dataclasses

import pytest

from bptt.derive.bptt import derive
from bptt.derive.direction import reverse_states
from bptt.derive.explicit import backward, unroll
from bptt.derive.models import load
from bptt.derive.nodes import SeqAt, t
from bptt.tests.derive.test_exact import agree_to_30_digits, disagreements, forward_values, report
from bptt.tests.support.brute_force import DIGITS
from bptt.tests.support.problems import make_problem
from bptt.tests.support.zoo import supporting

STEPS = 3
CELLS = [name for name in supporting("mirror") if not load(name).teacher_forcing]


def mirrored(model):
    """The model with every read at t-1 made a read at t+1: all its states run in reverse time."""

    def flip(expr):
        later = {ref: SeqAt(ref.name, t + 1, ref.rows, ref.role) for ref in expr.atoms(SeqAt) if ref.time == t - 1}
        return expr.xreplace(later)

    steps = tuple((seq, flip(rhs)) for seq, rhs in model.steps)
    outputs = tuple((seq, flip(rhs)) for seq, rhs in model.outputs)
    return dataclasses.replace(model, name=f"{model.name}-reversed", steps=steps, outputs=outputs)


def reversed_env(env, steps):
    """The data at step k moved to step steps + 1 - k; the initial values at 0 moved to steps + 1."""
    out = {}
    for key, value in env.items():
        if isinstance(key, SeqAt) and key.time.is_Integer:
            key = key.func(key.name, steps + 1 - int(key.time), key.rows, key.role)
        out[key] = value
    return out


@pytest.mark.parametrize("name", CELLS)
def test_a_cell_in_reverse_time_has_the_cells_gradients(name):
    case = make_problem(name, STEPS, seed=11)
    mirror = mirrored(case.model)
    assert set(reverse_states(mirror)) == set(mirror.states)
    loss = case.model.concrete_loss()
    expected = backward(derive(case.model, loss=loss), STEPS, forward_values(case, DIGITS))
    env = reversed_env(case.values_env(DIGITS), STEPS)
    unroll(mirror, STEPS, env)
    got = backward(derive(mirror, loss=loss), STEPS, env)
    entries = {symbol: expected[key][n] for key, matrix in case.entries.items() for n, symbol in enumerate(matrix)}
    bad = disagreements(got, entries, case, agree_to_30_digits)
    assert not bad, report(bad)
