"""Elementwise functions, one entry each: the function, its derivative, its LaTeX
and its slope bound, the maths only. Every rule table and printer reads this registry, so a new
activation is one `register(Elementwise(...))`, in the tool or in a user's model file; each
backend's printer maps the entry's kind to its code (codegen/printing/functions.py for NumPy).

The derivative is written the way textbooks write it, from the input `x` or the
output `y = f(x)` of the step, whichever reads better: tanh' = 1 - y^2,
sigmoid' = y (1 - y), exp' = y, relu' = 1[y > 0], softplus' = sigmoid(x).
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp
from sympy.core.symbol import Str
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.column import Column


class UnknownFunction(ValueError):
    """An elementwise function with no registry entry."""


@dataclass(frozen=True)
class Elementwise:
    """One elementwise function f.

    scalar: f as a SymPy function of one scalar (the exact proofs unroll with it).
    derivative: (x, y) -> the column vector f'(x), from the input x and/or the output y.
    latex: the function's name in LaTeX, e.g. r"\\tanh".
    slope_bound: sup |f'|, or None if unbounded (the gradient-flow bound of Pascanu et al.).
    family: for one of a family of functions (leaky_relu of any slope), the family's name, which the
        printers' tables key its code by; its own name if empty.
    constants: the (name, value) pairs of the family's parameters (leaky_relu's slope).
    """

    name: str
    scalar: Callable
    derivative: Callable
    latex: str
    slope_bound: object = None
    family: str = ""
    constants: tuple = ()

    @property
    def kind(self):
        """The key of the function's code in every backend's table."""
        return self.family or self.name


class Apply(Column):
    """An elementwise function of a vector: tanh(a), sigmoid(a), relu(a)."""

    def __new__(cls, func, arg):
        return Column.__new__(cls, func if isinstance(func, Str) else Str(func), arg)

    function = property(lambda self: self.args[0].name)
    arg = property(lambda self: self.args[1])

    @functools.cached_property  # the argument's shape is a walk of its tree; a tree asks it of each node
    def shape(self):
        return self.args[1].shape


FUNCTIONS = {}
_registrations = 0  # how many times register() ran: a derivation cached under another count may be stale


def register(entry):
    """Add (or replace) an elementwise function; returns a constructor `f(x) -> Apply`."""
    global _registrations
    FUNCTIONS[entry.name] = entry
    _registrations += 1
    return lambda x: Apply(entry.name, x)


def registrations():
    """The number of functions registered so far, replacements included: part of a cached derivation's key."""
    return _registrations


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
    entry = lookup(node.function)
    if entry.derivative is None:
        raise UnknownFunction(f"{node.function!r} has no derivative registered (it is the slope of another function)")
    return entry.derivative(node.arg, out)


def _ones(v):
    return OneMatrix(*v.shape)


@functools.cache  # a cell's powers, derived and printed many times over
def power(exponent):
    """The entry of x^p elementwise (`HadamardPower(x, p)`) for a rational p: sigma^-1 is p = -1/2, the square
    SymPy folds `x * x` into p = 2. One entry per exponent, of the family `power` whose constant is p; SymPy's
    own node carries it, so it is looked up by its exponent, not registered by name. The slope p x^(p - 1)."""
    p = sp.nsimplify(exponent)
    if not p.is_Rational:
        raise UnknownFunction(f"an elementwise power must have a rational exponent, not {p}")
    if p == 0:  # a constant, no power of its base: SymPy keeps v^0 as it is
        raise UnknownFunction("an elementwise power must have a non-zero exponent: v^0 is a column of ones, not of v")
    return Elementwise(
        f"power({p})",
        lambda z: z**p,
        lambda x, y: _power_slope(x, p, y),
        rf"(\cdot)^{{\odot {sp.latex(p)}}}",
        family="power",
        constants=(("exponent", p),),
    )


def _power_slope(x, p, y):
    """p x^(p - 1): the ones for p = 1, p x for p = 2; for a named square root y = x^(1/2) (a norm's sigma),
    y^(-1) / 2, which reads the forward's y."""
    if p == 1:
        return _ones(x)
    if p == sp.Rational(1, 2) and not isinstance(y, sp.HadamardPower):
        return p * sp.HadamardPower(y, -1)
    return p * (x if p == 2 else sp.HadamardPower(x, p - 1))


def register_slope(name, scalar, latex, family="", constants=()):
    """Register f' of the function `name` as an elementwise function of its own, `name'`, for an f'
    with no short form in x and y; its constructor, for the derivative of f's entry."""
    return register(Elementwise(f"{name}'", scalar, None, latex, family=family and f"{family}'", constants=constants))


step = register(
    Elementwise(
        "step",
        lambda z: sp.Heaviside(z, 0),  # 0 at 0, as torch's relu' is
        lambda x, y: sp.ZeroMatrix(*x.shape),
        r"\operatorname{step}",
        slope_bound=0,
    )
)
identity = register(Elementwise("identity", lambda z: z, lambda x, y: _ones(x), r"\operatorname{id}", 1))
tanh = register(Elementwise("tanh", sp.tanh, lambda x, y: _ones(y) - sp.HadamardPower(y, 2), r"\tanh", 1))
sigmoid = register(
    Elementwise(
        "sigmoid",
        lambda z: 1 / (1 + sp.exp(-z)),
        lambda x, y: sp.HadamardProduct(y, _ones(y) - y),
        r"\sigma",
        sp.Rational(1, 4),
    )
)
relu = register(Elementwise("relu", lambda z: sp.Max(z, 0), lambda x, y: step(y), r"\operatorname{ReLU}", 1))
softplus = register(
    Elementwise("softplus", lambda z: sp.log(1 + sp.exp(z)), lambda x, y: sigmoid(x), r"\operatorname{softplus}", 1)
)
exp = register(Elementwise("exp", sp.exp, lambda x, y: y, r"\exp"))
log = register(Elementwise("log", sp.log, lambda x, y: sp.HadamardPower(x, -1), r"\log"))
_elu_slope = register_slope("elu", lambda z: sp.Piecewise((1, z > 0), (sp.exp(z), True)), r"\operatorname{ELU}'")
elu = register(
    Elementwise(
        "elu",
        lambda z: sp.Piecewise((z, z > 0), (sp.exp(z) - 1, True)),
        lambda x, y: _elu_slope(x),
        r"\operatorname{ELU}",
        1,
    )
)
_softsign_slope = register_slope("softsign", lambda z: 1 / (1 + sp.Abs(z)) ** 2, r"\operatorname{softsign}'")
softsign = register(
    Elementwise(
        "softsign",
        lambda z: z / (1 + sp.Abs(z)),
        lambda x, y: _softsign_slope(x),
        r"\operatorname{softsign}",
        1,
    )
)
silu = register(
    Elementwise(
        "silu",
        lambda z: z / (1 + sp.exp(-z)),
        lambda x, y: sp.HadamardProduct(sigmoid(x), _ones(x) + sp.HadamardProduct(x, _ones(x) - sigmoid(x))),
        r"\operatorname{SiLU}",
        sp.Rational(11, 10),
    )
)


def _gelu(z):
    """GELU, tanh approximation: z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))."""
    return z / 2 * (1 + sp.tanh(sp.sqrt(2 / sp.pi) * (z + sp.Rational(44715, 10**6) * z**3)))


_Z = sp.Symbol("z", real=True)
_gelu_slope = register_slope("gelu", lambda z: sp.diff(_gelu(_Z), _Z).subs(_Z, z), r"\operatorname{GELU}'")
gelu = register(Elementwise("gelu", _gelu, lambda x, y: _gelu_slope(x), r"\operatorname{GELU}", sp.Rational(113, 100)))


def register_leaky_relu(slope=0.01, name="leaky_relu"):
    """Leaky ReLU max(x, slope x), 0 < slope < 1 (torch's default slope is 0.01),
    and its derivative LeakyReLU'(x): 1 where x > 0, slope elsewhere. The printers know the family
    leaky_relu: its code takes the slope."""
    slope = sp.nsimplify(slope)
    constants = (("slope", slope),)
    slope_of = register_slope(
        name,
        lambda z: slope + (1 - slope) * sp.Heaviside(z, 0),
        r"\operatorname{LeakyReLU}'",
        family="leaky_relu",
        constants=constants,
    )
    return register(
        Elementwise(
            name,
            lambda z: sp.Max(z, slope * z),
            lambda x, y: slope_of(x),
            r"\operatorname{LeakyReLU}",
            1,
            family="leaky_relu",
            constants=constants,
        )
    )


leaky_relu = register_leaky_relu()
