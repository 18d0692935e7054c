"""Random cells with normalisations (issue 28), apart from cell_plans.py's plans: a plan of cells.plans() with 1-3
of its activations' equations rewritten as users write norms. `normed_plans()` draws them, `build_normed(plan)`
writes the Model:

    before  g_t = f(layer_norm(z, gamma, beta, eps))   or rms_norm(z, gamma, eps): a norm of the pre-activation
    after   g_t = layer_norm(f(z), ...)                 a norm of the activation (eps > 0: relu(z) may be constant)
    mean    g_t = f(z - mean(z))                         a centred pre-activation
    sum     g_t = f(z) - (1 + sum(z^2) / 4)^(-1/2)       a scalar of a sum of squares, broadcast; a power of it
"""

import dataclasses
from dataclasses import dataclass

import sympy as sp
from hypothesis import strategies as st

from bptt.derive.elementwise import Apply
from bptt.derive.model import vector
from bptt.derive.nodes import layer_norm, mean, rms_norm, sum
from bptt.derive.norms import Norm
from bptt.derive.reductions import Reduce
from bptt.tests.support.cell_plans import Gate, Layer, Plan, Term, Update, build
from bptt.tests.support.cells import plans

KINDS = ("before", "after", "mean", "sum")


@dataclass(frozen=True)
class Normalisation:
    """What is done to the equation number `at` (counted among the equations that apply a function)."""

    at: int
    kind: str  # one of KINDS
    rms: bool = False  # an RMS norm (no bias), else a layer norm
    gain: bool = True
    bias: bool = True
    eps: sp.Rational = sp.S.Zero


@dataclass(frozen=True)
class NormedPlan:
    plan: object  # a cell_plans.Plan
    normalisations: tuple


@st.composite
def normed_plans(draw):
    plan = draw(plans())
    drawn = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(KINDS))
        eps = draw(st.sampled_from((0, sp.Rational(1, 10)))) if kind == "before" else sp.Rational(1, 10)
        drawn.append(
            Normalisation(
                draw(st.integers(0, 20)), kind, draw(st.booleans()), draw(st.booleans()), draw(st.booleans()), eps
            )
        )
    return NormedPlan(plan, tuple(drawn))


def build_normed(normed):
    """The plan's Model with its normalisations written in; each at an equation of the form f(z) not taken yet."""
    model = build(normed.plan)
    steps = list(model.steps)
    params = list(model.params)
    free = [k for k, (_, rhs) in enumerate(steps) if isinstance(rhs, Apply)]
    for n, norm in enumerate(normed.normalisations):
        if not free:
            break
        k = free.pop(norm.at % len(free))
        seq, rhs = steps[k]
        gain = vector(f"gamma{n}", seq.rows) if norm.gain else None
        bias = vector(f"beta{n}", seq.rows) if norm.bias and not norm.rms else None
        params += [p for p in (gain, bias) if p is not None]
        steps[k] = (seq, _normalised(norm, rhs, gain, bias))
    return dataclasses.replace(model, name="normed-cell", steps=tuple(steps), params=tuple(params))


def _normalised(norm, rhs, gain, bias):
    def normed(v):
        return rms_norm(v, gain, norm.eps) if norm.rms else layer_norm(v, gain, bias, norm.eps)

    z = rhs.arg
    if norm.kind == "before":
        return Apply(rhs.function, normed(z))
    if norm.kind == "after":
        return normed(rhs)
    if norm.kind == "mean":
        return Apply(rhs.function, z - mean(z))
    return rhs - sp.HadamardPower(1 + sum(sp.HadamardPower(z, 2)) / 4, sp.Rational(-1, 2))


def _norm_of(model, test):
    return any(test(node) for _, rhs in model.assignments for node in sp.preorder_traversal(rhs))


# The shapes normed_plans() must draw among the cells of a test: what the expanded Model holds.
NORM_SHAPES = {
    "a layer norm (mu named)": lambda m: any(s.name.startswith("mu_") for s in m.intermediates),
    "an RMS norm (sigma without mu)": lambda m: any(
        s.name.startswith("sigma_") and f"mu_{s.name[6:]}" not in {i.name for i in m.intermediates}
        for s in m.intermediates
    ),
    "a norm of an activation": lambda m: any(
        isinstance(rhs, Apply) and f"sigma_{s.name}" in {i.name for i in m.intermediates} for s, rhs in m.steps
    ),
    "a mean in an activation's argument": lambda m: _norm_of(
        m, lambda n: isinstance(n, Apply) and any(isinstance(r, Reduce) for r in sp.preorder_traversal(n.arg))
    ),
    "a sum": lambda m: _norm_of(m, lambda n: isinstance(n, Reduce) and n.name == "sum"),
    "no Norm node left": lambda m: not _norm_of(m, lambda n: isinstance(n, Norm)),
}


def _example():
    """One cell with every kind: three gates and a state of one layer, each rewritten its own way."""
    reads = (Term("input"), Term("recurrent", source="h1"), Term("bias"))
    gates = tuple(Gate(name, "tanh", reads, named=False) for name in ("z1", "r1", "n1"))
    layer = Layer(1, ("h1",), False, gates, (Update("h1", "activation", activation="sigmoid", terms=reads),))
    kinds = (
        Normalisation(0, "before", eps=sp.Rational(1, 10)),
        Normalisation(0, "after", rms=True, eps=sp.Rational(1, 10)),
        Normalisation(0, "mean"),
        Normalisation(0, "sum"),
    )
    return NormedPlan(Plan((layer,), "squared", False, False, False), kinds)


EXAMPLE = _example()  # normed_plans()'s explicit example: it has every one of NORM_SHAPES
