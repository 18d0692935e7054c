"""Elementwise functions, one entry each: the function, its derivative, its LaTeX
and its code. Every rule table and printer reads this registry, so a new
activation is one `register(Elementwise(...))`, in the tool or in a user's model file.

The derivative is written the way textbooks write it, from the input `x` or the
output `y = f(x)` of the step, whichever reads better: tanh' = 1 - y^2,
sigmoid' = y (1 - y), exp' = y, relu' = 1[y > 0], softplus' = sigmoid(x).
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp
from sympy.core.symbol import Str
from sympy.matrices.expressions.special import OneMatrix

from .column import Column


class UnknownFunction(ValueError):
    """An elementwise function with no registry entry."""


@dataclass(frozen=True)
class Elementwise:
    """One elementwise function f.

    scalar: f as a SymPy function of one scalar (the exact proofs unroll with it).
    derivative: (x, y) -> the column vector f'(x), from the input x and/or the output y.
    latex: the function's name in LaTeX, e.g. r"\\tanh".
    code: per backend, a format string of the argument: `{arg}` where it stands
        alone (inside a call's parentheses), `{operand}` where an operator binds
        to it (parenthesised when it is compound). Keep the argument's dtype.
    slope_bound: sup |f'|, or None if unbounded (the gradient-flow bound of Pascanu et al.).
    helpers: names of helper functions the code calls, per backend.
    """

    name: str
    scalar: Callable
    derivative: Callable
    latex: str
    code: dict
    slope_bound: object = None
    helpers: dict = field(default_factory=dict)


class Apply(Column):
    """An elementwise function of a vector: tanh(a), sigmoid(a), relu(a)."""

    def __new__(cls, func, arg):
        return Column.__new__(cls, func if isinstance(func, Str) else Str(func), arg)

    function = property(lambda self: self.args[0].name)
    arg = property(lambda self: self.args[1])
    shape = property(lambda self: self.args[1].shape)


FUNCTIONS = {}


def register(entry):
    """Add (or replace) an elementwise function; returns a constructor `f(x) -> Apply`."""
    FUNCTIONS[entry.name] = entry
    return lambda x: Apply(entry.name, x)


def lookup(name):
    if name not in FUNCTIONS:
        known = ", ".join(sorted(FUNCTIONS))
        raise UnknownFunction(
            f"no derivative for the elementwise function {name!r} (known: {known}; "
            "add one with bptt.derive.elementwise.register)"
        )
    return FUNCTIONS[name]


def derivative(node, out):
    """f'(x) of an Apply node as a column vector; `out` names its value y = f(x)."""
    return lookup(node.function).derivative(node.arg, out)


def _ones(v):
    return OneMatrix(*v.shape)


step = register(
    Elementwise(
        name="step",
        scalar=lambda z: sp.Heaviside(z, 0),
        derivative=lambda x, y: sp.ZeroMatrix(*x.shape),
        latex=r"\mathbb{1}_{>0}",
        code={"numpy": "np.heaviside({arg}, 0)"},
        slope_bound=0,
    )
)
tanh = register(
    Elementwise(
        name="tanh",
        scalar=sp.tanh,
        derivative=lambda x, y: _ones(y) - sp.HadamardPower(y, 2),
        latex=r"\tanh",
        code={"numpy": "np.tanh({arg})"},
        slope_bound=1,
    )
)
sigmoid = register(
    Elementwise(
        name="sigmoid",
        scalar=lambda z: 1 / (1 + sp.exp(-z)),
        derivative=lambda x, y: sp.HadamardProduct(y, _ones(y) - y),
        latex=r"\sigma",
        code={"numpy": "_sigmoid({arg})"},
        slope_bound=sp.Rational(1, 4),
        helpers={"numpy": ("_sigmoid",)},
    )
)
relu = register(
    Elementwise(
        name="relu",
        scalar=lambda z: sp.Max(z, 0),
        derivative=lambda x, y: step(y),
        latex=r"\operatorname{ReLU}",
        code={"numpy": "np.maximum({arg}, 0)"},
        slope_bound=1,
    )
)
softplus = register(
    Elementwise(
        name="softplus",
        scalar=lambda z: sp.log(1 + sp.exp(z)),
        derivative=lambda x, y: sigmoid(x),
        latex=r"\operatorname{softplus}",
        code={"numpy": "np.logaddexp(0, {arg})"},
        slope_bound=1,
    )
)
exp = register(
    Elementwise(
        name="exp",
        scalar=sp.exp,
        derivative=lambda x, y: y,
        latex=r"\exp",
        code={"numpy": "np.exp({arg})"},
    )
)


def register_leaky_relu(slope=0.01, name="leaky_relu"):
    """Leaky ReLU max(x, slope x), 0 < slope < 1 (torch's default slope is 0.01),
    and its derivative LeakyReLU'(x): 1 where x > 0, slope elsewhere."""
    slope = sp.nsimplify(slope)
    gap = 1 - slope
    slope_of = register(
        Elementwise(
            name=f"{name}'",
            scalar=lambda z: slope + gap * sp.Heaviside(z, 0),
            derivative=lambda x, y: sp.ZeroMatrix(*x.shape),
            latex=r"\operatorname{LeakyReLU}'",
            code={"numpy": f"{float(slope)!r} + {float(gap)!r} * np.heaviside({{arg}}, 0)"},
            slope_bound=0,
        )
    )
    return register(
        Elementwise(
            name=name,
            scalar=lambda z: sp.Max(z, slope * z),
            derivative=lambda x, y: slope_of(x),
            latex=r"\operatorname{LeakyReLU}",
            code={"numpy": f"np.maximum({{arg}}, {float(slope)!r} * {{operand}})"},
            slope_bound=1,
        )
    )


leaky_relu = register_leaky_relu()
