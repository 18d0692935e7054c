"""Backpropagation through time, derived from a model's step equations.

Every use of a value is a consumer: an assignment of the same step, or (for a
state read at t-1) an assignment of the next step, or (for a reverse-time state,
read at t+1) an assignment of the previous step. A forward state's adjoint
recursion runs back in time from dL/dh_T; a reverse state's runs forward in time
from dL/dh_1, and its initial value h_{T+1} gets the gradient of step T. The adjoint of a value is
the sum over its consumers of the vector-Jacobian product of that consumer's
equation. States and outputs keep named adjoints (dL/dh_t, dL/do_t). An
intermediate's adjoint (dL/da_t) is kept named or substituted into its uses:
`named="all"` names every one (the generated code computes each once),
`"none"` substitutes every one (the closed forms need that), and `"textbook"`
follows the rule of `_textbook_builder`.
"""

import functools
from dataclasses import dataclass

import sympy as sp

from bptt.derive.adjoint import backprop, check_products
from bptt.derive.atoms import atoms
from bptt.derive.blocks import Placed, sum_over_time
from bptt.derive.direction import initial_time, is_reverse
from bptt.derive.nodes import Adj, Diag, SeqAt, T, TimeSum, matrix_sum, references, t
from bptt.derive.refusal import refusing

NEXT, SAME, PREVIOUS = "next", "same", "previous"
ACROSS = (NEXT, PREVIOUS)  # a consumer in another step


@dataclass(frozen=True)
class Contribution:
    """One consumer's share of an adjoint: `value` flows back through `through`."""

    value: object
    through: object  # the consumer's SeqAt (at t, t+1 or t-1)
    rhs: object  # the consumer's equation, at the same time as `through`
    when: str  # SAME step, NEXT step (a forward state's) or PREVIOUS step (a reverse state's)


@dataclass(frozen=True)
class Derivation:
    model: object
    named: frozenset  # the intermediate Seqs whose adjoints stay named
    output_adjoints: dict  # output Seq -> dL/do_t
    states: dict  # state Seq -> [Contribution] making up dL/dh_t for t < T
    forced: dict  # teacher-forced state Seq -> [Contribution] that teacher forcing cuts
    intermediates: dict  # intermediate Seq -> [Contribution] making up its adjoint
    params: dict  # parameter -> [Contribution] of one step t, summed over t

    def recursion(self, seq):
        """dL/dS_t for 1 <= t < T (for a reverse state, 1 < t <= T)."""
        return _total(self.states[seq])

    def last(self, seq):
        """The step where a state's adjoint recursion starts: T, or 1 for a reverse state."""
        return sp.S.One if is_reverse(self.model, seq) else T

    def terminal(self, seq):
        """dL/dS at the step `last(seq)`: the step after it (before it, for a reverse state) does not exist."""
        same = [c.value for c in self.states[seq] if c.when == SAME]
        return _total_values(same, seq).subs(t, self.last(seq))

    def initial(self, seq):
        """dL/dS_0 (dL/dS_{T+1} for a reverse state): only the first step (the last) reads the initial state."""
        contributions = self.states[seq] if seq in self.states else self.forced[seq]
        across = [c.value for c in contributions if c.when in ACROSS]
        return _total_values(across, seq).subs(t, initial_time(self.model, seq))

    def param_gradient(self, param):
        """dL/dtheta = sum_{t=1}^T of the per-step contributions (inside each block of a sliced parameter);
        a zero matrix when nothing that the loss reads depends on theta."""
        if not self.params[param]:
            return sp.ZeroMatrix(*param.shape)
        return sum_over_time(_total(self.params[param]), t, 1, T, TimeSum)

    def intermediate(self, seq):
        return _total(self.intermediates[seq])


def _total(contributions):
    return matrix_sum(c.value for c in contributions) if contributions else sp.S.Zero


def _total_values(values, seq):
    return matrix_sum(values, seq.rows)


def derive(model, named="none", loss=None):
    """The Derivation of BPTT for a model; named is "none", "all" or "textbook";
    `loss` overrides the model's loss node. A Refusal names the model and the equation."""
    with refusing(model):
        check_products(model)
        return _derive(model, named, loss)


def _derive(model, named, loss):
    loss = model.loss if loss is None else loss
    weight = 1 / T if model.mean else sp.S.One
    loss_grads = backprop(loss, weight)
    outputs = {seq: loss_grads.get(seq(t), sp.ZeroMatrix(seq.rows, 1)) for seq, _ in model.outputs}
    names = {"none": frozenset(), "all": frozenset(model.intermediates)}
    builder = _Builder(model, names[named]) if named in names else _textbook_builder(model)
    states = {seq: builder.contributions(seq) for seq in model.states if seq not in model.forced}
    forced = {seq: builder.contributions(seq) for seq in model.forced}
    intermediates = {seq: builder.contributions(seq) for seq in model.intermediates}
    params = {p: builder.param_contributions(p) for p in model.params}
    return Derivation(model, builder.named, outputs, states, forced, intermediates, params)


def _textbook_builder(model):
    """A _Builder whose named intermediates are those a textbook names, by one rule for every model:
    an intermediate's adjoint is substituted into its uses when it is a single term
    with at most one diag factor (dL/da_t = diag(1 - h_t^2) dL/dh_t, the activation's
    slope times a named adjoint), and named otherwise (a gate's pre-activation:
    dL/di_t = diag(sigma'(i_t)) diag(g_t) dL/dc_t; an intermediate read twice, or read by a slice: the stack of
    its slices' adjoints).
    Intermediates are read only later in their own step, so deciding them last first sees every use already
    decided, and the builder's caches hold what a builder of the final names would compute (one builder, not one
    per intermediate)."""
    builder = _Builder(model, set())
    for seq in reversed(model.intermediates):
        adjoint = _total(builder.contributions(seq))
        terms = adjoint.args if isinstance(adjoint, sp.MatAdd) else (adjoint,)
        if len(terms) > 1 or any(_diag_factors(term) > 1 or isinstance(term, Placed) for term in terms):
            builder.named.add(seq)
    builder.named = frozenset(builder.named)
    return builder


def _diag_factors(term):
    factors = term.as_coeff_matrices()[1] if isinstance(term, sp.MatMul) else [term]
    return sum(isinstance(factor, Diag) for factor in factors)


class _Builder:
    def __init__(self, model, named):
        self.model = model
        self.named = named
        self.rhs = {seq.name: rhs for seq, rhs in model.assignments}
        self.seqs = {seq.name: seq for seq, _ in model.assignments}
        self.backpropagated = {}  # assigned Seq -> its equation's leaf adjoints (None if forced)
        self.found = {}  # Seq -> its contributions

    def adjoint(self, seq):
        """dL/dv_t of an assigned sequence: named, inlined for intermediates, None when nothing flows
        into it: a teacher-forced state (its value is data), an intermediate that no consumer reads
        (a gate computed and never used, or read only through a flat function such as step)."""
        if seq in self.model.forced:
            return None
        if seq.role == "intermediate" and not self.contributions(seq):
            return None
        if seq.role == "intermediate" and seq not in self.named:
            return _total(self.contributions(seq))
        return Adj(seq(t))

    def consumers(self, name):
        """Assignments that read `name` (at t or t-1), with their leaf adjoints."""
        for seq, rhs in self.model.assignments:
            if name not in reads(rhs):
                continue
            grads = self.backprop(seq, rhs)
            if grads is not None:
                yield seq, rhs, grads

    def backprop(self, seq, rhs):
        """The leaf adjoints of seq's equation; once per builder, though each name the equation reads asks."""
        if seq not in self.backpropagated:
            adjoint = self.adjoint(seq)
            self.backpropagated[seq] = None if adjoint is None else backprop(rhs, adjoint, out=seq(t))
        return self.backpropagated[seq]

    def contributions(self, target):
        """Every consumer's share of dL/d target_t, in a deterministic order; once per builder."""
        if target not in self.found:
            self.found[target] = self._contributions(target)
        return self.found[target]

    def _contributions(self, target):
        found = []
        for seq, rhs, grads in self.consumers(target.name):
            for leaf, value in sorted(grads.items(), key=lambda kv: sp.default_sort_key(kv[0])):
                if not isinstance(leaf, SeqAt) or leaf.name != target.name:
                    continue
                if leaf.time == t:
                    found.append(Contribution(value, seq(t), rhs, SAME))
                elif leaf.time == t - 1:  # read at t-1 by step t, so step t+1 reads the value at t
                    found.append(Contribution(value.subs(t, t + 1), seq(t + 1), rhs.subs(t, t + 1), NEXT))
                else:  # read at t+1 by step t, so step t-1 reads the value at t
                    found.append(Contribution(value.subs(t, t - 1), seq(t - 1), rhs.subs(t, t - 1), PREVIOUS))
        return found

    def param_contributions(self, param):
        return [
            Contribution(grads[param], seq(t), rhs, SAME)
            for seq, rhs, grads in self.consumers(param.name)
            if param in grads
        ]


@functools.lru_cache(maxsize=4096)  # asked of every equation once per name a derivation looks up
def reads(expr):
    """Names of the sequences and parameters an expression reads."""
    names = {r.name for r in references(expr)} | {p.name for p in atoms(expr, sp.MatrixSymbol)}
    return tuple(sorted(names))
