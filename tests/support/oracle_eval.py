"""The oracle's evaluator: a SymPy node of a model's step, evaluated in torch (float64), node by node.

It shares no code with bptt.codegen: from bptt.derive it takes only the node classes, to recognise
nodes, and each elementwise function's and reduction's SymPy scalar form, which it evaluates with its own rules.
A column vector at one step is a tensor (B, rows, 1); a parameter, a matrix (rows, cols); an
integer label, (B,); a scalar inside an elementwise function, a tensor of its argument's shape.
"""

import operator
from dataclasses import dataclass, field
from functools import lru_cache, reduce

import sympy as sp
import torch
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.elementwise import FUNCTIONS, Apply
from bptt.derive.nodes import OneHot, SeqAt, Softmax, SoftmaxCrossEntropy, SquaredError, t
from bptt.derive.norms import Norm
from bptt.derive.reductions import Reduce

DTYPE = torch.float64
Z = sp.Symbol("z", real=True)  # the argument of an elementwise function's scalar form


class OracleError(ValueError):
    """A model or an input the oracle cannot evaluate; the message says which."""


@dataclass
class Scope:
    """What a step's expressions read: sizes, parameters, values at t and t-1, scalar symbols."""

    sizes: dict  # size Symbol -> int
    params: dict  # name -> tensor (rows, cols)
    now: dict = field(default_factory=dict)  # name -> value at t: (B, rows, 1), or (B,) labels
    before: dict = field(default_factory=dict)  # state name -> value at t-1
    symbols: dict = field(default_factory=dict)  # scalar Symbol -> tensor


def evaluate(node, scope):
    """The value of a SymPy node: a tensor (B, rows, cols) or (rows, cols), or a float."""
    for kind in type(node).__mro__:
        if kind in RULES:
            return RULES[kind](node, scope)
    if isinstance(node, sp.Expr) and not isinstance(node, sp.MatrixExpr) and node.is_number:
        return float(node)
    raise OracleError(f"the oracle has no rule for {type(node).__name__}: {node}")


def size_of(expr, sizes):
    """The integer value of a size expression (h, 4*h) under the bound sizes."""
    return int(sp.sympify(expr).xreplace(sizes))


def _sequence(node, scope):
    """h_t, x_t (data or an earlier assignment at t) or h_{t-1} (a state at t-1)."""
    offset = node.time - t
    held = scope.now if offset == 0 else scope.before if offset == -1 else {}
    if node.name not in held:
        raise OracleError(f"{node} is not known at this point of the step")
    return held[node.name]


def _parameter(node, scope):
    """A parameter matrix (a vector parameter is a one-column matrix)."""
    if node.name not in scope.params:
        raise OracleError(f"{node.name} is not a parameter")
    return scope.params[node.name]


def _matmul(node, scope):
    """A matrix product, with its scalar coefficient (-1 in 1 - z_t)."""
    coeff, factors = node.as_coeff_matrices()
    product = reduce(torch.matmul, [evaluate(f, scope) for f in factors])
    return product if coeff == 1 else evaluate(coeff, scope) * product


def _sum(node, scope):
    """A sum of matrices (MatAdd) or of scalars (Add)."""
    return sum(evaluate(arg, scope) for arg in node.args)


def _product(node, scope):
    """An elementwise product (HadamardProduct) or a scalar product (Mul)."""
    return reduce(operator.mul, [evaluate(arg, scope) for arg in node.args])


def _power(node, scope):
    """An elementwise power (HadamardPower) or a scalar power (Pow)."""
    return evaluate(node.base, scope) ** evaluate(node.exp, scope)


def _transpose(node, scope):
    """The transpose of a matrix."""
    return evaluate(node.arg, scope).transpose(-2, -1)


def _slice(node, scope):
    """A block of a parameter, W_ih[h:2h, :]."""
    rows, cols = ([size_of(bound, scope.sizes) for bound in bounds] for bounds in (node.rowslice, node.colslice))
    return evaluate(node.parent, scope)[..., slice(*rows), slice(*cols)]


def _ones(node, scope):
    """The ones matrix: a scalar c in a sum of columns is c times it."""
    return torch.ones(size_of(node.rows, scope.sizes), size_of(node.cols, scope.sizes), dtype=DTYPE)


def _zeros(node, scope):
    """The zero matrix."""
    return torch.zeros(size_of(node.rows, scope.sizes), size_of(node.cols, scope.sizes), dtype=DTYPE)


def _identity(node, scope):
    """The identity matrix."""
    return torch.eye(size_of(node.rows, scope.sizes), dtype=DTYPE)


def _matpow(node, scope):
    """An integer power of a square matrix."""
    return torch.linalg.matrix_power(evaluate(node.base, scope), int(node.exp))


def _apply(node, scope):
    """An elementwise function, through its registry entry's SymPy scalar form f(z)."""
    if node.function not in FUNCTIONS:
        raise OracleError(f"no registry entry for the elementwise function {node.function!r}")
    form = _scalar_form(node.function, FUNCTIONS[node.function].scalar)
    inner = Scope(scope.sizes, scope.params, symbols={Z: evaluate(node.arg, scope)})
    value = evaluate(form, inner)
    return value if isinstance(value, torch.Tensor) else torch.full_like(inner.symbols[Z], value)


@lru_cache
def _scalar_form(name, scalar):
    return sp.sympify(scalar(Z))


def _reduce(node, scope):
    """A reduction over the units (mean, sum) through its registry entry's SymPy form of the entries z_1..z_n."""
    column = evaluate(node.arg, scope)  # (B, n, 1)
    entries = sp.symbols(f"z1:{column.shape[-2] + 1}", real=True)
    form = node.reduction.scalar(list(entries))
    inner = Scope(scope.sizes, scope.params, symbols={z: column[..., k : k + 1, :] for k, z in enumerate(entries)})
    value = evaluate(sp.sympify(form), inner)
    return value if isinstance(value, torch.Tensor) else torch.full_like(column[..., :1, :], value)


def _norm(node, scope):
    """A norm the model did not name the parts of: its equations, written out."""
    return evaluate(node.inline(), scope)


def _softmax(node, scope):
    """softmax of a column: over the rows."""
    return torch.softmax(evaluate(node.arg, scope), dim=-2)


def _onehot(node, scope):
    """The one-hot column of an integer label (B,), with `classes` rows."""
    labels = evaluate(node.label, scope)
    return torch.nn.functional.one_hot(labels, size_of(node.args[1], scope.sizes)).to(DTYPE)[..., None]


def _squared_error(node, scope):
    """1/2 ||o - y||^2 of each sample, (B,)."""
    gap = evaluate(node.prediction, scope) - evaluate(node.target, scope)
    return 0.5 * (gap**2).sum(dim=(-2, -1))


def _cross_entropy(node, scope):
    """-log softmax(s)[y] of each sample, (B,), for integer labels y."""
    scores = evaluate(node.prediction, scope)[..., 0]
    labels = evaluate(node.target, scope)
    return torch.logsumexp(scores, dim=-1) - scores.gather(-1, labels[:, None])[:, 0]


def _symbol(node, scope):
    """The argument of a scalar form, or a size."""
    if node in scope.symbols:
        return scope.symbols[node]
    if node in scope.sizes:
        return float(scope.sizes[node])
    raise OracleError(f"unknown symbol {node}")


def _as_tensor(value):
    return value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=DTYPE)


def _max(node, scope):
    """Max(a, b, ...) elementwise (relu, leaky relu)."""
    return reduce(torch.maximum, [_as_tensor(evaluate(arg, scope)) for arg in node.args])


def _min(node, scope):
    """Min(a, b, ...) elementwise."""
    return reduce(torch.minimum, [_as_tensor(evaluate(arg, scope)) for arg in node.args])


def _heaviside(node, scope):
    """Heaviside(z, h0): 1 for z > 0, h0 at 0, 0 below."""
    z = _as_tensor(evaluate(node.args[0], scope))
    at_zero = evaluate(node.args[1], scope) if len(node.args) > 1 else 0.5
    return torch.where(z > 0, 1.0, torch.where(z == 0, at_zero, 0.0)).to(DTYPE)


def _piecewise(node, scope):
    """Piecewise((e1, c1), (e2, c2), ..., (en, True)): the first branch whose condition holds."""
    value = torch.tensor(float("nan"), dtype=DTYPE)  # where no condition holds
    for branch, condition in reversed(node.args):
        value = torch.where(_as_tensor(evaluate(condition, scope)), _as_tensor(evaluate(branch, scope)), value)
    return value


def _true(node, scope):
    """The condition True of a Piecewise's last branch."""
    return torch.tensor(True)


def _relation(compare):
    def rule(node, scope):
        """A comparison z > 0 in a Piecewise condition."""
        return compare(evaluate(node.lhs, scope), evaluate(node.rhs, scope))

    return rule


def _function(torch_function):
    def rule(node, scope):
        """A SymPy scalar function (tanh, exp, log, Abs) by its torch counterpart."""
        return torch_function(_as_tensor(evaluate(node.args[0], scope)))

    return rule


RULES = {
    SeqAt: _sequence,
    sp.MatrixSymbol: _parameter,
    sp.MatMul: _matmul,
    sp.MatAdd: _sum,
    sp.HadamardProduct: _product,
    sp.HadamardPower: _power,
    sp.Transpose: _transpose,
    sp.MatrixSlice: _slice,
    OneMatrix: _ones,
    sp.ZeroMatrix: _zeros,
    sp.Identity: _identity,
    sp.MatPow: _matpow,
    Apply: _apply,
    Reduce: _reduce,
    Norm: _norm,
    Softmax: _softmax,
    OneHot: _onehot,
    SquaredError: _squared_error,
    SoftmaxCrossEntropy: _cross_entropy,
    sp.Symbol: _symbol,
    sp.Add: _sum,
    sp.Mul: _product,
    sp.Pow: _power,
    sp.tanh: _function(torch.tanh),
    sp.exp: _function(torch.exp),
    sp.log: _function(torch.log),
    sp.Abs: _function(torch.abs),
    sp.Max: _max,
    sp.Min: _min,
    sp.Heaviside: _heaviside,
    sp.Piecewise: _piecewise,
    sp.StrictGreaterThan: _relation(operator.gt),
    sp.GreaterThan: _relation(operator.ge),
    sp.StrictLessThan: _relation(operator.lt),
    sp.LessThan: _relation(operator.le),
    sp.logic.boolalg.BooleanTrue: _true,
}
