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

from bptt.derive.column import Column


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
    entry = lookup(node.function)
    if entry.derivative is None:
        raise UnknownFunction(f"{node.function!r} has no derivative registered (it is the slope of another function)")
    return entry.derivative(node.arg, out)


def _ones(v):
    return OneMatrix(*v.shape)


def register_slope(name, scalar, latex, code):
    """Register f' of the function `name` as an elementwise function of its own, `name'`, for an f'
    with no short form in x and y; its constructor, for the derivative of f's entry."""
    return register(Elementwise(f"{name}'", scalar, None, latex, code))


step = register(
    Elementwise(
        "step",
        lambda z: sp.Heaviside(z, 0),  # 0 at 0, as torch's relu' is
        lambda x, y: sp.ZeroMatrix(*x.shape),
        r"\operatorname{step}",
        {
            "numpy": "np.heaviside({arg}, 0)",
            "torch": "({operand} > 0).to({operand}.dtype)",
            "jax": "jnp.heaviside({arg}, 0)",
        },
        slope_bound=0,
    )
)
identity = register(
    Elementwise(
        "identity",
        lambda z: z,
        lambda x, y: _ones(x),
        r"\operatorname{id}",
        {"numpy": "{arg}", "torch": "{arg}", "jax": "{arg}"},
        1,
    )
)
tanh = register(
    Elementwise(
        "tanh",
        sp.tanh,
        lambda x, y: _ones(y) - sp.HadamardPower(y, 2),
        r"\tanh",
        {"numpy": "np.tanh({arg})", "torch": "torch.tanh({arg})", "jax": "jnp.tanh({arg})"},
        1,
    )
)
sigmoid = register(
    Elementwise(
        "sigmoid",
        lambda z: 1 / (1 + sp.exp(-z)),
        lambda x, y: sp.HadamardProduct(y, _ones(y) - y),
        r"\sigma",
        {"numpy": "_sigmoid({arg})", "torch": "torch.sigmoid({arg})", "jax": "jax.nn.sigmoid({arg})"},
        sp.Rational(1, 4),
        helpers={"numpy": ("_sigmoid",)},
    )
)
relu = register(
    Elementwise(
        "relu",
        lambda z: sp.Max(z, 0),
        lambda x, y: step(y),
        r"\operatorname{ReLU}",
        {"numpy": "np.maximum({arg}, 0)", "torch": "torch.relu({arg})", "jax": "jnp.maximum({arg}, 0)"},
        1,
    )
)
softplus = register(
    Elementwise(
        "softplus",
        lambda z: sp.log(1 + sp.exp(z)),
        lambda x, y: sigmoid(x),
        r"\operatorname{softplus}",
        {
            "numpy": "np.logaddexp(0, {arg})",
            "torch": "torch.logaddexp({operand}, torch.zeros_like({arg}))",
            "jax": "jnp.logaddexp(0, {arg})",
        },
        1,
    )
)
exp = register(
    Elementwise(
        "exp",
        sp.exp,
        lambda x, y: y,
        r"\exp",
        {"numpy": "np.exp({arg})", "torch": "torch.exp({arg})", "jax": "jnp.exp({arg})"},
    )
)
log = register(
    Elementwise(
        "log",
        sp.log,
        lambda x, y: sp.HadamardPower(x, -1),
        r"\log",
        {"numpy": "np.log({arg})", "torch": "torch.log({arg})", "jax": "jnp.log({arg})"},
    )
)
_elu_slope = register_slope(
    "elu",
    lambda z: sp.Piecewise((1, z > 0), (sp.exp(z), True)),
    r"\operatorname{ELU}'",
    {
        "numpy": "np.where({operand} > 0, 1, np.exp(np.minimum({arg}, 0)))",
        "torch": "torch.where({operand} > 0, 1, torch.exp(torch.clamp({arg}, max=0)))",
        "jax": "jnp.where({operand} > 0, 1, jnp.exp(jnp.minimum({arg}, 0)))",
    },
)
elu = register(
    Elementwise(
        "elu",
        lambda z: sp.Piecewise((z, z > 0), (sp.exp(z) - 1, True)),
        lambda x, y: _elu_slope(x),
        r"\operatorname{ELU}",
        {
            "numpy": "np.where({operand} > 0, {arg}, np.expm1(np.minimum({arg}, 0)))",
            "torch": "torch.where({operand} > 0, {arg}, torch.expm1(torch.clamp({arg}, max=0)))",
            "jax": "jnp.where({operand} > 0, {arg}, jnp.expm1(jnp.minimum({arg}, 0)))",
        },
        1,
    )
)
_softsign_slope = register_slope(
    "softsign",
    lambda z: 1 / (1 + sp.Abs(z)) ** 2,
    r"\operatorname{softsign}'",
    {
        "numpy": "1 / (1 + np.abs({arg})) ** 2",
        "torch": "1 / (1 + torch.abs({arg})) ** 2",
        "jax": "1 / (1 + jnp.abs({arg})) ** 2",
    },
)
softsign = register(
    Elementwise(
        "softsign",
        lambda z: z / (1 + sp.Abs(z)),
        lambda x, y: _softsign_slope(x),
        r"\operatorname{softsign}",
        {
            "numpy": "{operand} / (1 + np.abs({arg}))",
            "torch": "{operand} / (1 + torch.abs({arg}))",
            "jax": "{operand} / (1 + jnp.abs({arg}))",
        },
        1,
    )
)
silu = register(
    Elementwise(
        "silu",
        lambda z: z / (1 + sp.exp(-z)),
        lambda x, y: sp.HadamardProduct(sigmoid(x), _ones(x) + sp.HadamardProduct(x, _ones(x) - sigmoid(x))),
        r"\operatorname{SiLU}",
        {
            "numpy": "{operand} * _sigmoid({arg})",
            "torch": "{operand} * torch.sigmoid({arg})",
            "jax": "{operand} * jax.nn.sigmoid({arg})",
        },
        sp.Rational(11, 10),
        helpers={"numpy": ("_sigmoid",)},
    )
)


def _gelu(z):
    """GELU, tanh approximation: z/2 (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))."""
    return z / 2 * (1 + sp.tanh(sp.sqrt(2 / sp.pi) * (z + sp.Rational(44715, 10**6) * z**3)))


_Z = sp.Symbol("z", real=True)
_GELU_INNER = "0.7978845608028654 * ({operand} + 0.044715 * {operand} ** 3)"  # sqrt(2/pi) (z + 0.044715 z^3)
_TANH = {"numpy": "np.tanh", "torch": "torch.tanh", "jax": "jnp.tanh"}  # each backend's tanh


def _gelu_slope_code(tanh):
    return (
        f"0.5 * (1 + {tanh}({_GELU_INNER})) + 0.5 * {{operand}} * (1 - {tanh}({_GELU_INNER}) ** 2)"
        " * 0.7978845608028654 * (1 + 0.134145 * {operand} ** 2)"
    )


_gelu_slope = register_slope(
    "gelu",
    lambda z: sp.diff(_gelu(_Z), _Z).subs(_Z, z),
    r"\operatorname{GELU}'",
    {backend: _gelu_slope_code(tanh) for backend, tanh in _TANH.items()},
)
gelu = register(
    Elementwise(
        "gelu",
        _gelu,
        lambda x, y: _gelu_slope(x),
        r"\operatorname{GELU}",
        {backend: f"0.5 * {{operand}} * (1 + {tanh}({_GELU_INNER}))" for backend, tanh in _TANH.items()},
        sp.Rational(113, 100),
    )
)


def register_leaky_relu(slope=0.01, name="leaky_relu"):
    """Leaky ReLU max(x, slope x), 0 < slope < 1 (torch's default slope is 0.01),
    and its derivative LeakyReLU'(x): 1 where x > 0, slope elsewhere."""
    slope = sp.nsimplify(slope)
    gap = 1 - slope
    slope_of = register_slope(
        name,
        lambda z: slope + gap * sp.Heaviside(z, 0),
        r"\operatorname{LeakyReLU}'",
        {
            "numpy": f"{float(slope)!r} + {float(gap)!r} * np.heaviside({{arg}}, 0)",
            "torch": f"{float(slope)!r} + {float(gap)!r} * ({{operand}} > 0).to({{operand}}.dtype)",
            "jax": f"{float(slope)!r} + {float(gap)!r} * jnp.heaviside({{arg}}, 0)",
        },
    )
    return register(
        Elementwise(
            name,
            lambda z: sp.Max(z, slope * z),
            lambda x, y: slope_of(x),
            r"\operatorname{LeakyReLU}",
            {
                "numpy": f"np.maximum({{arg}}, {float(slope)!r} * {{operand}})",
                "torch": f"torch.maximum({{arg}}, {float(slope)!r} * {{operand}})",
                "jax": f"jnp.maximum({{arg}}, {float(slope)!r} * {{operand}})",
            },
            1,
        )
    )


leaky_relu = register_leaky_relu()
