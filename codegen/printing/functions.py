"""The NumPy backend's code for the elementwise functions of the registry (derive/elementwise.py), by
the entry's kind: each a function of the array library `xp` and the argument `x` (printing/function_code.py).
The JAX backend prints these same entries on jnp (jax/printer.py); torch has its own table (torch/functions.py).

A function of your own gets its code here: NUMPY_FUNCTIONS.register("mish", lambda xp, x: ...).
"""

from bptt.codegen.printing.function_code import FunctionTable, Library, helper
from bptt.derive.reductions import reduction_kind


def _gelu_inner(x):
    """sqrt(2/pi) (x + 0.044715 x^3), inside GELU's tanh."""
    return 0.7978845608028654 * (x + 0.044715 * x**3)


def _gelu_slope(xp, x):
    tanh = xp.tanh(_gelu_inner(x))
    return 0.5 * (1 + tanh) + 0.5 * x * (1 - tanh**2) * 0.7978845608028654 * (1 + 0.134145 * x**2)


ENTRIES = {
    "step": lambda xp, x: xp.heaviside(x, 0),
    "identity": lambda xp, x: x,
    "tanh": lambda xp, x: xp.tanh(x),
    "sigmoid": lambda xp, x: xp.sigmoid(x),
    "relu": lambda xp, x: xp.maximum(x, 0),
    "softplus": lambda xp, x: xp.logaddexp(0, x),
    "exp": lambda xp, x: xp.exp(x),
    "log": lambda xp, x: xp.log(x),
    "elu'": lambda xp, x: xp.where(x > 0, 1, xp.exp(xp.minimum(x, 0))),
    "elu": lambda xp, x: xp.where(x > 0, x, xp.expm1(xp.minimum(x, 0))),
    "softsign'": lambda xp, x: 1 / (1 + xp.abs(x)) ** 2,
    "softsign": lambda xp, x: x / (1 + xp.abs(x)),
    "silu": lambda xp, x: x * xp.sigmoid(x),
    "gelu'": _gelu_slope,
    "gelu": lambda xp, x: 0.5 * x * (1 + xp.tanh(_gelu_inner(x))),
    "leaky_relu'": lambda xp, x, slope: float(slope) + float(1 - slope) * xp.heaviside(x, 0),
    "leaky_relu": lambda xp, x, slope: xp.maximum(x, float(slope) * x),
    "power": lambda xp, x, exponent: x**exponent,
    # the reductions over the units (derive/reductions.py), under keys no elementwise function's name takes
    reduction_kind("mean"): lambda xp, x: x.mean(axis=-1, keepdims=True),
    reduction_kind("sum"): lambda xp, x: x.sum(axis=-1, keepdims=True),
}

NUMPY = Library("np", sigmoid=helper("_sigmoid"))  # exp(-|z|) / (1 + exp(-|z|)) below 0: no overflow, no 0
NUMPY_FUNCTIONS = FunctionTable("bptt.codegen.printing.functions.NUMPY_FUNCTIONS", NUMPY, ENTRIES)
