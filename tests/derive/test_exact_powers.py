"""Issue 28: the derivation of cells with elementwise powers, transposes and sums of parameters equals the chain rule
over the unrolled loss (tests/support/brute_force.py: sympy.diff of every operation of the unrolled computation),
at d=2, h=3, q=4, T=3, to 30 digits: a cell with all of them (tests/support/paper_cells.py:powered), minLSTM
as examples/ writes it, gates that are row slices of one intermediate and a state read by slices
(paper_cells.py:sliced_gates, sliced_state); normalised cells, a layer-normalised Elman cell, a GRU with
RMS-normalised gates and a cell that writes mean and sum out (norm_cells.py)."""

import pathlib

import mpmath
import numpy as np
import pytest

from bptt.derive.bptt import derive
from bptt.derive.explicit import backward, unroll
from bptt.tests.support.brute_force import DIGITS, recorded_gradients
from bptt.tests.support.problems import make_problem

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPECS = {
    "powered": f"{ROOT / 'tests' / 'support' / 'paper_cells.py'}:powered",
    "sliced_gates": f"{ROOT / 'tests' / 'support' / 'paper_cells.py'}:sliced_gates",
    "sliced_state": f"{ROOT / 'tests' / 'support' / 'paper_cells.py'}:sliced_state",
    "min_lstm": f"{ROOT / 'examples' / 'min_lstm.py'}:min_lstm",
    "layer_norm_elman": f"{ROOT / 'tests' / 'support' / 'norm_cells.py'}:layer_norm_elman",
    "rms_gru": f"{ROOT / 'tests' / 'support' / 'norm_cells.py'}:rms_gru",
    "reduced": f"{ROOT / 'tests' / 'support' / 'norm_cells.py'}:reduced",
}


@pytest.mark.parametrize("cell", sorted(SPECS))
def test_derivation_agrees_with_the_unrolled_loss_to_30_digits(cell):
    case = make_problem(SPECS[cell], 3, seed=3)
    brute = recorded_gradients(case)
    env = case.values_env(DIGITS)
    unroll(case.model, case.steps, env)
    derived = backward(derive(case.model, named="textbook"), case.steps, dict(env))
    assert set(derived) == set(case.entries)
    for name, symbols in case.entries.items():
        for index, symbol in np.ndenumerate(np.array(symbols.tolist(), dtype=object)):
            with mpmath.workdps(DIGITS):
                got, want = mpmath.mpf(derived[name][index]), brute[symbol]
                assert abs(got - want) <= mpmath.mpf(10) ** -30 * max(1, abs(want)), (name, index)
