"""A norm's adjoint as a textbook writes it. For x̂ = (v − μ1)/σ, μ = mean(v), σ = (mean((v − μ1)²) + ε)^½
(a layer norm; an RMS norm has no μ), the chain rule through μ, σ and x̂ gives three terms; with dσ/dv = x̂ᵀ/n they
collect into one product of the normalised vector's Jacobian:

    ∂L/∂v = (1/σ) (I − (1/n) 1 1ᵀ − (1/n) x̂ x̂ᵀ) ∂L/∂x̂          (layer norm)
    ∂L/∂v = (1/σ) (I − (1/n) x̂ x̂ᵀ) ∂L/∂x̂                       (RMS norm)

compact(derivation) finds each norm the model's steps hold (derive/norms.py names its parts μ, σ and x̂) and
replaces the three terms of its input's adjoint by one NormAdjoint, and drops the adjoints of μ and σ, which it
no longer reads. The documents print that Derivation; the code is generated from the uncollected one.
"""

from dataclasses import dataclass, replace

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.atoms import atoms
from bptt.derive.bptt import Contribution
from bptt.derive.nodes import Adj, SeqAt, t
from bptt.derive.norms import Norm
from bptt.derive.reductions import mean


class NormAdjoint(sp.MatrixExpr):
    """(1/σ)(I − (1/n)11ᵀ − (1/n)x̂x̂ᵀ) g, without the 11ᵀ term for an RMS norm (centred False)."""

    def __new__(cls, centred, hat, sigma, g):
        return sp.MatrixExpr.__new__(cls, sp.true if centred else sp.false, hat, sigma, g)

    centred = property(lambda self: bool(self.args[0]))
    hat = property(lambda self: self.args[1])
    sigma = property(lambda self: self.args[2])
    g = property(lambda self: self.args[3])
    shape = property(lambda self: self.args[1].shape)
    rereads = property(lambda self: 2 if self.centred else 1)  # g read again, by its mean(s): (g - mean(g) - ...)

    def projection(self):
        """I − (1/n)11ᵀ − (1/n)x̂x̂ᵀ as a SymPy matrix expression."""
        n = self.hat.shape[0]
        terms = [sp.Identity(n), -self.hat * self.hat.T / n]
        return sp.MatAdd(*terms, *([-OneMatrix(n, n) / n] if self.centred else []))

    def rows_form(self):
        """The same in O(n) per vector, for the code: (1/σ) ⊙ (g − 1 mean(g) − x̂ ⊙ 1 mean(x̂ ⊙ g)); no n x n matrix."""
        n, hat, g = self.hat.shape[0], self.hat, self.g
        ones = OneMatrix(n, 1)
        terms = [g, -sp.HadamardProduct(hat, ones * mean(sp.HadamardProduct(hat, g)))]
        terms += [-ones * mean(g)] if self.centred else []
        return sp.HadamardProduct(ones * sp.HadamardPower(self.sigma, -1), sp.MatAdd(*terms))

    def expanded(self):
        """The same product of plain SymPy nodes (1/σ as a column of ones times σ⁻¹): for explicit evaluation."""
        n = self.hat.shape[0]
        scale = OneMatrix(n, 1) * sp.HadamardPower(self.sigma, -1)
        return sp.HadamardProduct(scale, self.projection() * self.g)


@dataclass(frozen=True)
class Found:
    """One norm among a model's steps: the Seqs of its input v, μ (None for an RMS norm), σ and x̂."""

    v: object
    mu: object
    sigma: object
    hat: object

    @property
    def parts(self):
        return {seq for seq in (self.mu, self.sigma, self.hat) if seq is not None}


def norms(model):
    """Every norm whose named parts the model's steps hold, as derive/norms.py writes them, of an assigned value:
    x̂'s equation is the one Norm.parts writes of the values it reads (v, σ and, for a layer norm, μ)."""
    rhs = dict(model.steps)
    seqs = {seq.name: seq for seq in rhs}
    found = []
    for hat, value in rhs.items():
        parts = _parts(value, rhs, seqs)
        if parts is None or hat.rows == 1:
            continue
        v, mu, sigma = parts
        kind = "layer_norm" if mu is not None else "rms_norm"
        written = dict(Norm(kind, v, 0, 0, 0).parts(v, mu, sigma))
        if written["hat"] != value or (mu is not None and rhs[seqs[mu.name]] != written["mu"]):
            continue
        norm = Found(seqs[v.name], mu and seqs[mu.name], seqs[sigma.name], hat)
        if _read_by_parts_only(model, norm):
            found.append(norm)
    return found


def _parts(value, rhs, seqs):
    """(v, μ or None, σ) at t that x̂'s equation reads: one assigned column v, σ a 1 x 1 square root; else None."""
    read = {node for node in atoms(value, SeqAt) if node.time == t and node.name in seqs}
    if len(read) != len(atoms(value, SeqAt)):
        return None
    wide = [node for node in read if seqs[node.name].rows != 1]
    roots = [node for node in read if seqs[node.name].rows == 1 and _root(rhs[seqs[node.name]])]
    rest = [node for node in read if seqs[node.name].rows == 1 and node not in roots]
    if len(wide) != 1 or len(roots) != 1 or len(rest) > 1:
        return None
    return wide[0], (rest[0] if rest else None), roots[0]


def _root(value):
    return isinstance(value, sp.HadamardPower) and value.exp == sp.S.Half


def _read_by_parts_only(model, norm):
    """Whether μ and σ are read by the norm's own equations only (σ's and x̂'s), so their adjoints fold."""
    own = {norm.sigma.name, norm.hat.name}
    folded = {seq.name for seq in norm.parts if seq is not norm.hat}
    for seq, value in model.assignments:
        read = {node.name for node in atoms(value, SeqAt)}
        if seq.name not in own and read & folded:
            return False
    return True


def for_code(derivation):
    """compact(derivation) with each NormAdjoint in its O(n) form of reductions (NormAdjoint.rows_form)."""
    collected = compact(derivation)
    if collected is derivation:
        return derivation

    def rows(contributions):
        return [replace(c, value=c.value.replace(NormAdjoint, _rows_form)) for c in contributions]

    tables = {name: getattr(collected, name) for name in ("states", "forced", "intermediates")}
    return replace(collected, **{name: {s: rows(c) for s, c in table.items()} for name, table in tables.items()})


def tangents_in_rows(steps):
    """A StepTangents (derive/rtrl.py) with each NormAdjoint of a tangent in its O(n) form, for the code."""

    def rows(term):
        return term.replace(NormAdjoint, _rows_form)

    def table(terms):
        return {seq: [rows(term) for term in each] for seq, each in terms.items()}

    reads = {rows(term): of for term, of in steps.reads.items()}
    return replace(steps, tangents=table(steps.tangents), outputs=table(steps.outputs), reads=reads)


def _rows_form(*args):
    return NormAdjoint(*args).rows_form()


def compact(derivation):
    """The Derivation with each norm's input adjoint collected into a NormAdjoint (module docstring)."""
    found = norms(derivation.model)
    if not found:
        return derivation
    folded = {seq for norm in found for seq in norm.parts if seq is not norm.hat}
    states, forced, intermediates = (
        {seq: _collected(derivation, seq, found) for seq in table}
        for table in (derivation.states, derivation.forced, derivation.intermediates)
    )
    intermediates = {seq: value for seq, value in intermediates.items() if seq not in folded}
    return replace(
        derivation,
        named=derivation.named - folded,
        states=states,
        forced=forced,
        intermediates=intermediates,
    )


def _collected(derivation, seq, found):
    """seq's contributions with those through a norm's parts (if seq is its input) replaced by one."""
    contributions = (derivation.states | derivation.forced | derivation.intermediates)[seq]
    for norm in (n for n in found if n.v == seq):
        through = [c for c in contributions if c.through.name in {p.name for p in norm.parts}]
        if not through:
            continue
        hat = next(c for c in through if c.through.name == norm.hat.name)
        g = Adj(norm.hat(t)) if norm.hat in derivation.named else derivation.intermediate(norm.hat)
        value = NormAdjoint(norm.mu is not None, norm.hat(t), norm.sigma(t), g).subs(t, hat.through.time)
        first = contributions.index(through[0])
        kept = [c for c in contributions if c not in through]
        kept.insert(first, Contribution(value, hat.through, hat.rhs, hat.when))
        contributions = kept
    return contributions
