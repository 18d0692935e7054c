"""Forward mode through time: real-time recurrent learning (RTRL).

Along a direction W_dot of one parameter, the tangent of the state obeys
    h_dot_t = b_t + c_t h_dot_{t-1},   h_dot_0 = 0,
with b_t = df/dW [W_dot] (the step's own dependence) and c_t = dh_t/dh_{t-1}
(the Jacobian). The recurrence lemma solves it; the gradient follows from
the outputs' tangents: dL/dW [W_dot] = sum_t (dL/do_t)^T o_dot_t.
For the initial state h_0 the direction is h_dot_0 itself and b_t = 0.

With several states and intermediates a step's tangents are computed in the step's order, each
written through the named tangents before it (c_dot_t in h_dot_t, h1_dot_t in layer 2's gates), as
BPTT names the adjoints; so no tangent is longer than its own equation.
"""

from collections import Counter
from dataclasses import dataclass

import sympy as sp

from bptt.derive.closed_form import linear_coefficient
from bptt.derive.elementwise import Apply
from bptt.derive.model import Seq
from bptt.derive.nodes import DescendingTimeProduct, MatAt, SeqAt, TimeSum, matrix_sum, t
from bptt.derive.tangent import Tangent, tangent_terms

i_lemma, j_lemma = sp.Symbol("i", integer=True), sp.Symbol("j", integer=True)
n_lemma = sp.Symbol("n", integer=True, positive=True)


@dataclass(frozen=True)
class ForwardMode:
    """Tangents along a direction of `wrt` (a parameter, or a state Seq for its initial value).

    Each named tangent (tangent_names) is written through the tangents of the step before it, so its
    terms are those of its own equation. A tangent that is zero along wrt has no entry."""

    model: object
    wrt: object
    tangents: dict  # named Seq -> terms of its tangent at t, in the step's order; each term linear in one
    #                 Tangent: of wrt, of a carried state at t-1, or of a named Seq assigned before it
    outputs: dict  # output Seq -> terms of o_dot_t
    carried: tuple  # the live states whose tangents at t-1 the step reads (not zero along wrt)

    def jacobian(self, seq):
        """c_t = dh_t/dh_{t-1} of a single-state cell, as a matrix: every intermediate inlined."""
        inlined = forward_mode(self.model, seq, named=(seq,))
        return linear_coefficient(matrix_sum(inlined.tangents.get(seq, []), seq.rows), Tangent(seq(t - 1)))


def live_states(model):
    return [seq for seq in model.states if seq not in model.forced]


def tangent_names(model):
    """The Seqs whose tangents are named quantities: every live state, and every intermediate read more
    than once in the step (inlining it would write its tangent twice). An intermediate read once is
    inlined into its reader, so a tangent is as long as its own equation (with its gate's activation)."""
    computed = [value for seq, value in model.assignments if seq not in model.forced]  # forced: data
    reads = Counter(
        node.name for value in computed for node in sp.preorder_traversal(value) if isinstance(node, SeqAt) and node.time == t
    )
    live = live_states(model)
    return tuple(
        seq for seq, _ in model.steps if seq in live or (seq.role == "intermediate" and reads[seq.name] > 1)
    )


def gate_names(model):
    """The Seqs whose tangents a document names: every live state and every intermediate, but a
    pre-activation (an intermediate read once, by an equation that is an elementwise function of it alone),
    which is written inside its activation's tangent: one line per gate, z_dot_t = diag(1 - z_t^2) (W_dot x_t + ...)."""
    computed = [value for seq, value in model.assignments if seq not in model.forced]
    reads = Counter(
        node.name for value in computed for node in sp.preorder_traversal(value) if isinstance(node, SeqAt) and node.time == t
    )
    activated = {value.arg.name for value in computed if isinstance(value, Apply) and isinstance(value.arg, SeqAt)}
    live = live_states(model)
    return tuple(
        seq
        for seq, _ in model.steps
        if seq in live or (seq.role == "intermediate" and not (reads[seq.name] == 1 and seq.name in activated))
    )


def direction_terms(model, wrt, named):
    """{Seq: terms} of the tangents along a direction of the parameter wrt alone that read that direction
    itself (the beta_t of the recurrence lemma), for the named Seqs and the outputs: the term the direction adds
    to the step's tangents. The Seqs not named are written inside their readers, as forward_mode writes them."""
    names = {seq.name for seq in named}
    forced = {seq.name for seq in model.forced}
    inlined = {}  # a Seq not named -> the terms of its tangent along wrt itself

    def leaf(node):
        if isinstance(node, sp.MatrixSymbol):
            return [Tangent(node)] if node == wrt else []
        return inlined.get(node.name, []) if node.time == t and node.name not in names else []

    found = {}
    for seq, value in model.assignments:
        if seq.name in forced:
            continue
        terms = tangent_terms(value, leaf, out=seq(t))
        if seq.name in names or seq.role == "output":
            if terms:
                found[seq] = terms
        else:
            inlined[seq.name] = terms
    return found


def forward_mode(model, wrt, named=None):
    """The ForwardMode of a model along a parameter (MatrixSymbol) or an initial state (Seq);
    named: the Seqs whose tangents stay named (tangent_names by default)."""
    names = {seq.name for seq in (tangent_names(model) if named is None else named)}
    carried = _carried(model, wrt)
    tangents, outputs = _step_tangents(model, wrt, names, carried)
    return ForwardMode(model, wrt, tangents, outputs, tuple(s for s in live_states(model) if s.name in carried))


def _carried(model, wrt):
    """The names of the live states whose tangents along wrt are not zero at t - 1: a fixed point, from
    wrt's own state, adding every state whose equation reads wrt or a tangent not zero, until none is added."""
    forced = {seq.name for seq in model.forced}
    live = {seq.name for seq in live_states(model)}
    carried = {wrt.name} & live if isinstance(wrt, Seq) else set()
    while True:
        now = set()  # the sequences of step t whose tangents are not zero
        for seq, value in model.steps:
            if seq.name not in forced and _reads_tangent(value, wrt, carried, now):
                now.add(seq.name)
        if now & live <= carried:
            return carried
        carried |= now & live


def _reads_tangent(value, wrt, carried, now):
    """True if value reads wrt, or a value whose tangent is not zero: one of `now` at t, of `carried` at
    t - 1, or wrt's own initial state (teacher-forced too, its initial value is not data)."""
    if isinstance(wrt, sp.MatrixSymbol) and wrt in value.atoms(sp.MatrixSymbol):
        return True
    own = wrt.name if isinstance(wrt, Seq) else None
    for node in value.atoms(SeqAt):
        offset = node.time - t
        if (offset == 0 and node.name in now) or (offset == -1 and node.name in carried | {own}):
            return True
    return False


def _step_tangents(model, wrt, names, carried):
    """The tangents of one step, in order, with the states in `carried` non-zero at t-1."""
    forced = {seq.name for seq in model.forced}
    computed = {seq.name for seq, _ in model.steps} - forced
    terms_at_t = {}  # every non-forced sequence of the step so far -> its tangent's terms

    def leaf(node):
        if isinstance(node, sp.MatrixSymbol):
            return [Tangent(node)] if node == wrt else []
        offset = sp.simplify(node.time - t)
        if offset == -1:  # a teacher-forced initial state is read (as data) by step 1 only
            along_wrt = isinstance(wrt, Seq) and node.name == wrt.name
            return [Tangent(node)] if node.name in carried or along_wrt else []
        if offset == 0 and terms_at_t.get(node.name):
            return [Tangent(node)] if node.name in names else terms_at_t[node.name]
        return []  # inputs, labels, targets, teacher-forced data, tangents that are zero

    tangents = {}
    for seq, value in model.steps:
        if seq.name in forced:
            continue
        terms_at_t[seq.name] = tangent_terms(value, leaf, out=seq(t))
        if seq.name in names and terms_at_t[seq.name]:
            tangents[seq] = _local_first(terms_at_t[seq.name], computed)
    outputs = {seq: tangent_terms(value, leaf, out=seq(t)) for seq, value in model.outputs}
    return tangents, outputs


def _local_first(terms, computed):
    """The terms along wrt itself (b_t) before those through the tangents the step computes, each group
    in its order; computed: the names of those sequences."""

    def through_computed(term):
        return any(isinstance(d.of, SeqAt) and d.of.name in computed for d in term.atoms(Tangent))

    return [term for term in terms if not through_computed(term)] + [term for term in terms if through_computed(term)]


def factored(terms):
    """diag(u) A + diag(u) B -> diag(u) (A + B): the common left factor of every term pulled out."""
    if len(terms) > 1 and all(isinstance(term, sp.MatMul) for term in terms):
        first = terms[0].args[0]
        if all(term.args[0] == first for term in terms):
            rests = [sp.MatMul(*term.args[1:]).doit(deep=False) for term in terms]
            return sp.MatMul(first, sp.MatAdd(*rests)) if len(rests) > 1 else first * rests[0]
    return sp.MatAdd(*terms) if len(terms) > 1 else terms[0]


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
