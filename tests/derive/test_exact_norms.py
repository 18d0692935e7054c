"""Issue 28: the derivation of normalised cells equals the chain rule over the unrolled loss
(tests/support/brute_force.py: sympy.diff of every operation of the unrolled computation), at d=2, h=3, q=4,
T=3, to 30 digits: a layer-normalised Elman cell, a GRU with RMS-normalised gates, and a cell that writes mean
and sum out (tests/support/norm_cells.py)."""

import pathlib

import mpmath
import numpy as np
import pytest

from bptt.derive.bptt import derive
from bptt.derive.explicit import backward, unroll
from bptt.tests.support.brute_force import DIGITS, recorded_gradients
from bptt.tests.support.problems import make_problem

CELLS = pathlib.Path(__file__).resolve().parents[1] / "support" / "norm_cells.py"


@pytest.mark.parametrize("cell", ["layer_norm_elman", "rms_gru", "reduced"])
def test_normalised_derivation_agrees_with_the_unrolled_loss_to_30_digits(cell):
    case = make_problem(f"{CELLS}:{cell}", 3, seed=3)
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
