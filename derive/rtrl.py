"""Forward mode through time: real-time recurrent learning (RTRL).

Along a direction W_dot of one parameter, the tangent of the state obeys
    h_dot_t = b_t + c_t h_dot_{t-1},   h_dot_0 = 0,
with b_t = df/dW [W_dot] (the step's own dependence) and c_t = dh_t/dh_{t-1}
(the Jacobian). The recurrence lemma solves it; the gradient follows from
the outputs' tangents: dL/dW [W_dot] = sum_t (dL/do_t)^T o_dot_t.
For the initial state h_0 the direction is h_dot_0 itself and b_t = 0.
"""

from dataclasses import dataclass

import sympy as sp

from .closed_form import linear_coefficient
from .model import Seq
from .nodes import DescendingTimeProduct, MatAt, SeqAt, TimeSum, matrix_sum, t
from .tangent import Tangent, tangent_terms

i_lemma, j_lemma = sp.Symbol("i", integer=True), sp.Symbol("j", integer=True)
n_lemma = sp.Symbol("n", integer=True, positive=True)


@dataclass(frozen=True)
class ForwardMode:
    """Tangents along a direction of `wrt` (a parameter, or a state Seq for its initial value)."""

    model: object
    wrt: object
    local: dict  # live state Seq -> terms of b_t (no tangent of the past)
    carried: dict  # live state Seq -> terms linear in the tangents at t-1
    outputs: dict  # output Seq -> terms of o_dot_t, linear in Tangent(theta) or Tangent(state at t)

    def jacobian(self, seq):
        """c_t = dh_t/dh_{t-1} of a single-state cell, as a matrix."""
        return linear_coefficient(matrix_sum(self.carried[seq], seq.rows), Tangent(seq(t - 1)))


def live_states(model):
    return [seq for seq in model.states if seq not in model.forced]


def forward_mode(model, wrt):
    """The ForwardMode of a model along a parameter (MatrixSymbol) or an initial state (Seq)."""
    rhs = {seq.name: (seq, value) for seq, value in model.assignments}
    live = {seq.name for seq in live_states(model)}
    cache = {}

    def leaf(node, named_states):
        if isinstance(node, sp.MatrixSymbol):
            return [Tangent(node)] if node == wrt else []
        offset = sp.simplify(node.time - t)
        if node.name in live and (offset == -1 or (offset == 0 and named_states)):
            return [Tangent(node)]
        if isinstance(wrt, Seq) and node.name == wrt.name and offset == -1:
            return [Tangent(node)]  # a teacher-forced initial state: read (as data) by step 1 only
        if offset == 0 and node.name in rhs and node.name not in {s.name for s in model.forced}:
            if node.name not in cache:  # an earlier value of the same step: inline its tangent
                seq, value = rhs[node.name]
                cache[node.name] = tangent_terms(value, lambda n: leaf(n, False), out=seq(t))
            return cache[node.name]
        return []  # inputs, labels, targets, teacher-forced data

    local, carried = {}, {}
    for seq in live_states(model):
        terms = tangent_terms(rhs[seq.name][1], lambda n: leaf(n, False), out=seq(t))
        past = [
            term for term in terms if any(d.of.name in live for d in term.atoms(Tangent) if isinstance(d.of, SeqAt))
        ]
        carried[seq] = past
        local[seq] = [term for term in terms if term not in past]
    outputs = {seq: tangent_terms(value, lambda n: leaf(n, True), out=seq(t)) for seq, value in model.outputs}
    return ForwardMode(model, wrt, local, carried, outputs)


def factored(terms):
    """diag(u) A + diag(u) B -> diag(u) (A + B): the common left factor of every term pulled out."""
    if len(terms) > 1 and all(isinstance(term, sp.MatMul) for term in terms):
        first = terms[0].args[0]
        if all(term.args[0] == first for term in terms):
            rests = [sp.MatMul(*term.args[1:]).doit(deep=False) for term in terms]
            return sp.MatMul(first, sp.MatAdd(*rests)) if len(rests) > 1 else first * rests[0]
    return sp.MatAdd(*terms) if len(terms) > 1 else terms[0]


def reads_parameter(model, param):
    """True if some state update reads param (directly or through an intermediate); the
    equations of teacher-forced states do not count, their values being data in training."""
    return any(param in value.atoms(sp.MatrixSymbol) for seq, value in model.steps if seq not in model.forced)


def lemma(n=n_lemma):
    """The recurrence lemma (d2l): a_t = b_t + c_t a_{t-1} with a_0 = 0 gives
    a_t = b_t + sum_{i=1}^{t-1} (c_t c_{t-1} ... c_{i+1}) b_i.

    Returns (a, b, c, solution at t) with a, b vectors and c square matrices of size n."""
    # Greek letters, which no model's names clash with (the zoo has a_t, b, c and c_t)
    a, b = SeqAt("alpha", t, n, "state"), SeqAt("beta", t, n, "input")
    c = MatAt("Gamma", t, n)
    product = DescendingTimeProduct(c.subs(t, j_lemma), j_lemma, i_lemma + 1, t)
    solution = b + TimeSum(product * b.subs(t, i_lemma), i_lemma, 1, t - 1)
    return a, b, c, solution


def lemma_induction(solution, b, c):
    """The facts that prove the lemma by induction, as pairs that must be structurally equal.

    Write S(t) for the solution. Base: S(1) = b_1 (= b_1 + c_1 a_0, a_0 = 0).
    Step: S(t+1) = b_{t+1} + sum_{i=1}^{t} P(i+1, t+1) b_i. Split the newest
    factor off every product, P(i+1, t+1) = c_{t+1} P(i+1, t): the i = t term
    becomes c_{t+1} b_t, every other term c_{t+1} times S(t)'s, over S(t)'s
    range. So S(t+1) = b_{t+1} + c_{t+1} S(t)."""
    total = _sum_of(solution)
    total_next = _sum_of(solution.subs(t, t + 1))
    c_next = c.subs(t, t + 1)
    last = _empty_products(_split_newest(total_next.body.subs(i_lemma, total_next.end)))
    return [
        (_empty_sums(solution.subs(t, 1)), b.subs(t, 1)),
        (last, c_next * b),
        (_split_newest(total_next.body), c_next * total.body),
        ((total_next.start, total_next.end - 1), (total.start, total.end)),
    ]


def _sum_of(expr):
    return next(term for term in expr.args if isinstance(term, TimeSum))


def _split_newest(expr):
    """c_e c_{e-1} ... c_s -> c_e (c_{e-1} ... c_s), in every descending product."""
    return expr.replace(
        lambda e: isinstance(e, DescendingTimeProduct),
        lambda e: e.body.subs(e.index, e.end) * DescendingTimeProduct(e.body, e.index, e.start, e.end - 1),
    ).doit(deep=False)


def _empty_products(expr):
    empty = lambda e: isinstance(e, DescendingTimeProduct) and sp.simplify(e.end - e.start + 1) == 0  # noqa: E731
    return expr.replace(empty, lambda e: sp.Identity(e.shape[0])).doit(deep=False)


def _empty_sums(expr):
    empty = lambda e: isinstance(e, TimeSum) and sp.simplify(e.end - e.start + 1) == 0  # noqa: E731
    return expr.replace(empty, lambda e: sp.ZeroMatrix(*e.shape)).doit(deep=False)
