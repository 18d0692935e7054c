"""Truncated BPTT, derived from the full recursion and its closed form.

chunk tau:  the flow from step t+1 into step t is cut when tau divides t;
window tau: the gradient of output j reaches h_t only if j - t <= tau: the
           closed form's sum stops at min(T, t + tau);
random pi: the flow into step t is weighted by xi_{t+1}, 0 with probability
           1 - pi and 1/pi otherwise (Tallec and Ollivier, 2017). The xi are
           independent with mean 1, so every path's weight has mean 1 and the
           estimate is unbiased.
"""

import sympy as sp

from bptt.derive.bptt import NEXT, SAME
from bptt.derive.closed_form import j, k
from bptt.derive.nodes import T, TimeProduct, TimeSum, matrix_sum, t

tau = sp.Symbol("tau", integer=True, positive=True)


class Xi(sp.Function):
    """xi_t: the random weight of the flow into step t-1 from step t."""

    nargs = 1


class Kept(sp.Function):
    """1 if the flow from step t+1 into step t survives chunking (tau does not divide t), else 0."""

    nargs = 2


def _parts(derivation, seq):
    contributions = derivation.states[seq]
    local = matrix_sum((c.value for c in contributions if c.when == SAME), seq.rows)
    nxt = matrix_sum((c.value for c in contributions if c.when == NEXT), seq.rows)  # zero without recurrence
    return local, nxt


def chunked(derivation, seq):
    """dL/dh_t under chunked truncation: the next step's term survives unless tau | t."""
    local, nxt = _parts(derivation, seq)
    return sp.MatAdd(Kept(t, tau) * nxt, local)


def randomized(derivation, seq):
    """dL/dh_t under randomized truncation: the next step's term weighted by xi_{t+1}."""
    local, nxt = _parts(derivation, seq)
    return sp.MatAdd(Xi(t + 1) * nxt, local)


def windowed(form):
    """The closed form with every output's gradient stopped tau steps back."""
    return TimeSum(form.expr.body, j, t, sp.Min(T, t + tau))


def randomized_closed(form):
    """The closed form with each transposed Jacobian A_k weighted by its xi_k."""
    return TimeSum(TimeProduct(Xi(k) * form.jacobian, k, t + 1, j) * form.local, j, t, T)
