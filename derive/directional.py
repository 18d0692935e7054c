"""Closed forms of the state adjoints of a model with reverse-time states, one per state.

A forward state's adjoint recursion dL/dh_t = A_{t+1} dL/dh_{t+1} + b_t runs back from t = T and unrolls to
    dL/dh_t = sum_{j=t}^{T} (A_{t+1} ... A_j) b_j,
A_k the transposed Jacobian (dh_k/dh_{k-1})^T. A reverse state's dL/dg_t = A_{t-1} dL/dg_{t-1} + b_t runs
forward from t = 1 (step t-1 reads g_t) and unrolls to
    dL/dg_t = sum_{j=1}^{t} (A_{t-1} ... A_j) b_j,
A_k the transposed Jacobian (dg_k/dg_{k+1})^T. The two directions meet only in the local terms b_t: the
adjoints of step t that both read (the outputs', and a layer above's states').
"""

from dataclasses import dataclass

import sympy as sp

from bptt.derive.atoms import atoms
from bptt.derive.bptt import ACROSS, SAME
from bptt.derive.closed_form import NoClosedForm, block_closed_form, j, k, linear_coefficient
from bptt.derive.direction import REVERSE, directions, is_reverse
from bptt.derive.nodes import Adj, DescendingTimeProduct, T, TimeProduct, TimeSum, matrix_sum, t


@dataclass(frozen=True)
class DirectionalForm:
    seq: object
    reverse: bool
    jacobian: object  # A_k
    local: object  # b_j: the terms of step j itself
    expr: object  # the sum over j of the ordered product of A_k times b_j


def directional_forms(derivation):
    """{state Seq: DirectionalForm} of a derivation with every intermediate substituted; where a direction's
    states read each other across steps (a bidirectional LSTM's c and h), each of them maps to that direction's
    BlockClosedForm."""
    way = directions(derivation.model)
    found = {}
    for direction in dict.fromkeys(way[s] for s in derivation.states):
        states = [s for s in derivation.states if way[s] == direction]
        if _coupled(derivation, states):
            form = block_closed_form(derivation, states, reverse=direction == REVERSE)
            found.update(dict.fromkeys(states, form))
        else:
            found.update({seq: _form(derivation, seq) for seq in states})
    return {seq: found[seq] for seq in derivation.states}


def _coupled(derivation, states):
    """Whether a state's recursion reads another state's adjoint across steps."""
    names = {s.name for s in states}
    return any(
        a.of.name in names - {seq.name} and a.of.time != t
        for seq in states
        for c in derivation.states[seq]
        if c.when in ACROSS
        for a in atoms(c.value, Adj)
    )


def _form(derivation, seq):
    reverse = is_reverse(derivation.model, seq)
    shift = -1 if reverse else 1
    across = [c.value for c in derivation.states[seq] if c.when in ACROSS]
    local = matrix_sum([c.value for c in derivation.states[seq] if c.when == SAME], seq.rows)
    carried = Adj(seq(t + shift))
    if any(a.of.time != t and a != carried for v in across for a in atoms(v, Adj)):
        raise NoClosedForm("a state's recursion reads another state's adjoint from another step")
    if any(a.of.time != t for a in atoms(local, Adj)):
        raise NoClosedForm("the local term reads an adjoint from another step")
    coefficient = (
        linear_coefficient(matrix_sum(across, seq.rows), carried) if across else sp.ZeroMatrix(*[seq.rows] * 2)
    )
    jacobian = coefficient.subs(t, k + 1 if reverse else k - 1)  # A_k reads step k
    return DirectionalForm(seq, reverse, jacobian, local.subs(t, j), unrolled(reverse, jacobian, local.subs(t, j)))


def unrolled(reverse, jacobian, local):
    """The sum over j of the ordered product of A_k (jacobian) times b_j (local): j = 1..t with the latest
    A_k on the left for a reverse state, j = t..T with the oldest on the left for a forward one."""
    if reverse:
        return TimeSum(DescendingTimeProduct(jacobian, k, j, t - 1) * local, j, 1, t)
    return TimeSum(TimeProduct(jacobian, k, t + 1, j) * local, j, t, T)


def meeting(derivation):
    """[(adjoint at t, (states whose local term reads it))] for the adjoints that local terms of both directions
    read: where the two directions' recursions meet, in the order the states first read them."""
    way = directions(derivation.model)
    readers = {}
    for seq in derivation.states:
        local = matrix_sum([c.value for c in derivation.states[seq] if c.when == SAME], seq.rows)
        for adjoint in sorted(atoms(local, Adj), key=sp.default_sort_key):
            readers.setdefault(adjoint, []).append(seq)
    return [(a, tuple(seqs)) for a, seqs in readers.items() if len({way[s] for s in seqs}) > 1]
