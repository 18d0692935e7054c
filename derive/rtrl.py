"""Forward mode through time: real-time recurrent learning (RTRL).

Along a direction W_dot of one parameter, the tangent of the state obeys
    h_dot_t = b_t + c_t h_dot_{t-1},   h_dot_0 = 0,
with b_t = df/dW [W_dot] (the step's own dependence) and c_t = dh_t/dh_{t-1}
(the Jacobian). The recurrence lemma (derive/lemma.py) solves it; the gradient follows from
the outputs' tangents: dL/dW [W_dot] = sum_t (dL/do_t)^T o_dot_t.
For the initial state h_0 the direction is h_dot_0 itself and b_t = 0.

With several states and intermediates a step's tangents are computed in the step's order, each
written through the named tangents before it (c_dot_t in h_dot_t, h1_dot_t in layer 2's gates), as
BPTT names the adjoints; so no tangent is longer than its own equation.

The step is derived once along every direction at once (step_tangents): each term is linear in one
Tangent, so c_t's part (the terms through the tangents of the states and of the named sequences) is
shared by every parameter, and a parameter's b_t is its own terms. ForwardMode along one direction
keeps the terms that are not zero along it.
"""

import functools
from collections import Counter
from dataclasses import dataclass

import sympy as sp

from bptt.derive.atoms import atoms
from bptt.derive.closed_form import linear_coefficient
from bptt.derive.elementwise import Apply
from bptt.derive.model import Seq
from bptt.derive.nodes import SeqAt, matrix_sum, t, time_shift
from bptt.derive.norm_adjoint import NormAdjoint, norms
from bptt.derive.tangent import Tangent, tangent_terms


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
        node.name
        for value in computed
        for node in sp.preorder_traversal(value)
        if isinstance(node, SeqAt) and node.time == t
    )
    live = live_states(model)
    return tuple(seq for seq, _ in model.steps if seq in live or (seq.role == "intermediate" and reads[seq.name] > 1))


def gate_names(model):
    """The Seqs whose tangents a document names: every live state and every intermediate, but a
    pre-activation (an intermediate read once, by an equation that is an elementwise function of it alone),
    which is written inside its activation's tangent: one line per gate, z_dot_t = diag(1 - z_t^2) (W_dot x_t + ...)."""
    computed = [value for seq, value in model.assignments if seq not in model.forced]
    reads = Counter(
        node.name
        for value in computed
        for node in sp.preorder_traversal(value)
        if isinstance(node, SeqAt) and node.time == t
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
    return step_tangents(model, None if named is None else tuple(named)).along(wrt)


@dataclass(frozen=True)
class StepTangents:
    """A step's tangents along every direction at once, derived once per model: the terms of each named
    tangent and of each output's, each linear in one Tangent (of a parameter: its local term; of a state at
    t - 1; of a named Seq at t). Along one direction (`along`) a term stays if its Tangent is not zero there."""

    model: object
    tangents: dict  # named Seq -> its terms, in the order of its equation (every direction)
    outputs: dict  # output Seq -> its terms
    reads: dict  # term -> what its Tangent is of: a parameter, or a SeqAt at t - 1 or t

    def along(self, wrt):
        """The ForwardMode along wrt: the fixed point of the states whose tangents at t - 1 are not zero,
        from wrt's own state, adding every state whose tangent at t has a term that is not zero."""
        live = {seq.name for seq in live_states(self.model)}
        carried = {wrt.name} & live if isinstance(wrt, Seq) else set()
        own = {wrt.name} if isinstance(wrt, Seq) else set()  # a teacher-forced initial state: read by step 1
        while True:
            kept, now = self.kept(wrt, carried | own)
            if {seq.name for seq in kept} & live <= carried:
                break
            carried |= {seq.name for seq in kept} & live
        outputs = {
            seq: [term for term in terms if self.nonzero(term, wrt, carried | own, now)]
            for seq, terms in self.outputs.items()
        }
        computed = {seq.name for seq, _ in self.model.steps} - {seq.name for seq in self.model.forced}
        tangents = {seq: _local_first(terms, computed, self.reads) for seq, terms in kept.items()}
        return ForwardMode(
            self.model, wrt, tangents, outputs, tuple(s for s in live_states(self.model) if s.name in carried)
        )

    def kept(self, wrt, previous):
        """({named Seq: its terms not zero along wrt} for those with any, the names of those Seqs), in the
        step's order; previous: the states whose tangents at t - 1 are not zero."""
        kept, now = {}, set()
        for seq, terms in self.tangents.items():
            along = [term for term in terms if self.nonzero(term, wrt, previous, now)]
            if along:
                kept[seq] = along
                now.add(seq.name)
        return kept, now

    def nonzero(self, term, wrt, previous, now):
        """Whether a term is not zero along wrt: its Tangent is wrt's own, a state's at t - 1 in previous,
        or a named Seq's at t in now."""
        of = self.reads[term]
        if isinstance(of, sp.MatrixSymbol):
            return of == wrt
        return of.name in (previous if of.time != t else now)


@functools.cache  # the document, the codegen pass and the Jacobian read the same step's tangents
def step_tangents(model, named=None):
    """The StepTangents of a model; named: the Seqs whose tangents stay named (tangent_names by default)."""
    names = {seq.name for seq in (tangent_names(model) if named is None else named)}
    tangents, outputs = _step_tangents(model, names)
    reads = {}
    for term in [term for terms in (*tangents.values(), *outputs.values()) for term in terms]:
        (of,) = {d.of for d in atoms(term, Tangent)}
        reads[term] = of
    return StepTangents(model, tangents, outputs, reads)


def _step_tangents(model, names):
    """The tangents of one step along every direction, in order: every parameter's and every state's at t-1."""
    forced = {seq.name for seq in model.forced}
    states = {seq.name for seq in model.states}
    params = set(model.params)
    terms_at_t = {}  # every non-forced sequence of the step so far -> its tangent's terms

    def leaf(node):
        if isinstance(node, sp.MatrixSymbol):
            return [Tangent(node)] if node in params else []
        shift = time_shift(node.time)
        if shift == -1:  # a teacher-forced initial state is read (as data) by step 1 only
            return [Tangent(node)] if node.name in states else []
        if shift == 0 and terms_at_t.get(node.name):
            return [Tangent(node)] if node.name in names else terms_at_t[node.name]
        return []  # inputs, labels, targets, teacher-forced data, tangents that are zero

    tangents = {}
    found = {norm.hat.name: norm for norm in norms(model)}  # x̂'s tangent is J v_dot, J its Jacobian: no μ, σ
    folded = {part.name for norm in found.values() for part in norm.parts if part is not norm.hat}
    for seq, value in model.steps:
        if seq.name in forced or seq.name in folded:
            continue
        if seq.name in found:
            norm = found[seq.name]
            centred, hat, sigma = norm.mu is not None, norm.hat(t), norm.sigma(t)
            terms_at_t[seq.name] = [NormAdjoint(centred, hat, sigma, term) for term in leaf(norm.v(t))]
        else:
            terms_at_t[seq.name] = tangent_terms(value, leaf, out=seq(t))
        if seq.name in names and terms_at_t[seq.name]:
            tangents[seq] = terms_at_t[seq.name]
    outputs = {seq: tangent_terms(value, leaf, out=seq(t)) for seq, value in model.outputs}
    return tangents, outputs


def _local_first(terms, computed, reads):
    """The terms along wrt itself (b_t) before those through the tangents the step computes, each group
    in its order; computed: the names of those sequences; reads: what each term's Tangent is of."""

    def through_computed(term):
        return isinstance(reads[term], SeqAt) and reads[term].name in computed

    return [term for term in terms if not through_computed(term)] + [term for term in terms if through_computed(term)]


def factored(terms):
    """diag(u) A + diag(u) B -> diag(u) (A + B): the common left factor of every term pulled out."""
    if len(terms) > 1 and all(isinstance(term, sp.MatMul) for term in terms):
        first = terms[0].args[0]
        if all(term.args[0] == first for term in terms):
            rests = [sp.MatMul(*term.args[1:]).doit(deep=False) for term in terms]
            return sp.MatMul(first, sp.MatAdd(*rests)) if len(rests) > 1 else first * rests[0]
    return sp.MatAdd(*terms) if len(terms) > 1 else terms[0]
