"""The oracle's evaluator: a SymPy node of a model's step, evaluated in torch (float64), node by node: each node's
rule is applied once to the tree (compiled), giving a function of the step's Scope that runs the torch operations.

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
    return compiled(node)(scope)


@lru_cache(maxsize=1 << 14)
def compiled(node):
    """A function of a Scope giving the node's value: its rule applied to the tree once (the SymPy work: dispatch,
    coefficients, time offsets), the torch operations left to each call, in the order the rules write them."""
    for kind in type(node).__mro__:
        if kind in RULES:
            return RULES[kind](node)
    if isinstance(node, sp.Expr) and not isinstance(node, sp.MatrixExpr) and node.is_number:
        return _constant(float(node))
    raise OracleError(f"the oracle has no rule for {type(node).__name__}: {node}")


def _constant(value):
    return lambda scope: value


def size_of(expr, sizes):
    """The integer value of a size expression (h, 4*h) under the bound sizes."""
    return _sizer(expr)(sizes)


@lru_cache(maxsize=1 << 12)
def _sizer(expr):
    """size_of(expr, sizes) as a function of sizes: a number, a bound size or a multiple of one read at once
    (what a step asks of its slices and constant matrices), another expression substituted."""
    expr = sp.sympify(expr)
    coeff, size = expr.as_coeff_Mul()
    if expr.is_Integer:
        return _constant(int(expr))
    if size.is_Symbol and coeff.is_Integer:
        multiple = int(coeff)
        return lambda sizes: multiple * sizes[size] if size in sizes else int(expr.xreplace(sizes))
    return lambda sizes: int(expr.xreplace(sizes))


def _sequence(node):
    """h_t, x_t (data or an earlier assignment at t) or h_{t-1} (a state at t-1)."""
    offset, name = node.time - t, node.name
    now, before = offset == 0, offset == -1

    def run(scope):
        held = scope.now if now else scope.before if before else {}
        if name not in held:
            raise OracleError(f"{node} is not known at this point of the step")
        return held[name]

    return run


def _parameter(node):
    """A parameter matrix (a vector parameter is a one-column matrix)."""
    name = node.name

    def run(scope):
        if name not in scope.params:
            raise OracleError(f"{name} is not a parameter")
        return scope.params[name]

    return run


def _matmul(node):
    """A matrix product, with its scalar coefficient (-1 in 1 - z_t)."""
    coeff, factors = node.as_coeff_matrices()
    factors = [compiled(f) for f in factors]
    if coeff == 1:
        return lambda scope: reduce(torch.matmul, [f(scope) for f in factors])
    coeff = compiled(coeff)
    return lambda scope: coeff(scope) * reduce(torch.matmul, [f(scope) for f in factors])


def _sum(node):
    """A sum of matrices (MatAdd) or of scalars (Add)."""
    args = [compiled(arg) for arg in node.args]
    return lambda scope: sum(arg(scope) for arg in args)


def _product(node):
    """An elementwise product (HadamardProduct) or a scalar product (Mul)."""
    args = [compiled(arg) for arg in node.args]
    return lambda scope: reduce(operator.mul, [arg(scope) for arg in args])


def _power(node):
    """An elementwise power (HadamardPower) or a scalar power (Pow)."""
    base, exp = compiled(node.base), compiled(node.exp)
    return lambda scope: base(scope) ** exp(scope)


def _transpose(node):
    """The transpose of a matrix."""
    arg = compiled(node.arg)
    return lambda scope: arg(scope).transpose(-2, -1)


def _slice(node):
    """A block of a parameter, W_ih[h:2h, :]."""
    parent = compiled(node.parent)
    rows, cols = ([_sizer(bound) for bound in bounds] for bounds in (node.rowslice, node.colslice))

    def run(scope):
        sizes = scope.sizes
        return parent(scope)[..., slice(*[row(sizes) for row in rows]), slice(*[col(sizes) for col in cols])]

    return run


def _ones(node):
    """The ones matrix: a scalar c in a sum of columns is c times it."""
    rows, cols = _sizer(node.rows), _sizer(node.cols)
    return lambda scope: torch.ones(rows(scope.sizes), cols(scope.sizes), dtype=DTYPE)


def _zeros(node):
    """The zero matrix."""
    rows, cols = _sizer(node.rows), _sizer(node.cols)
    return lambda scope: torch.zeros(rows(scope.sizes), cols(scope.sizes), dtype=DTYPE)


def _identity(node):
    """The identity matrix."""
    rows = _sizer(node.rows)
    return lambda scope: torch.eye(rows(scope.sizes), dtype=DTYPE)


def _matpow(node):
    """An integer power of a square matrix."""
    base, exp = compiled(node.base), int(node.exp)
    return lambda scope: torch.linalg.matrix_power(base(scope), exp)


def _apply(node):
    """An elementwise function, through its registry entry's SymPy scalar form f(z) (the entry read at each call: a
    function may be registered anew)."""
    name, arg = node.function, compiled(node.arg)

    def run(scope):
        if name not in FUNCTIONS:
            raise OracleError(f"no registry entry for the elementwise function {name!r}")
        form = _scalar_form(name, FUNCTIONS[name].scalar)
        inner = Scope(scope.sizes, scope.params, symbols={Z: arg(scope)})
        value = form(inner)
        return value if isinstance(value, torch.Tensor) else torch.full_like(inner.symbols[Z], value)

    return run


@lru_cache
def _scalar_form(name, scalar):
    """The scalar form f(Z), compiled."""
    return compiled(sp.sympify(scalar(Z)))


def _reduce(node):
    """A reduction over the units (mean, sum) through its registry entry's SymPy form of the entries z_1..z_n."""
    arg = compiled(node.arg)

    def run(scope):
        column = arg(scope)  # (B, n, 1)
        entries, form = _reduction_form(node.reduction, column.shape[-2])
        inner = Scope(scope.sizes, scope.params, symbols={z: column[..., k : k + 1, :] for k, z in enumerate(entries)})
        value = form(inner)
        return value if isinstance(value, torch.Tensor) else torch.full_like(column[..., :1, :], value)

    return run


@lru_cache(maxsize=256)
def _reduction_form(reduction, n):
    """(z_1..z_n, the reduction's form of them compiled)."""
    entries = sp.symbols(f"z1:{n + 1}", real=True)
    return entries, compiled(sp.sympify(reduction.scalar(list(entries))))


def _norm(node):
    """A norm the model did not name the parts of: its equations, written out."""
    return compiled(node.inline())


def _softmax(node):
    """softmax of a column: over the rows."""
    arg = compiled(node.arg)
    return lambda scope: torch.softmax(arg(scope), dim=-2)


def _onehot(node):
    """The one-hot column of an integer label (B,), with `classes` rows."""
    label, classes = compiled(node.label), _sizer(node.args[1])

    def run(scope):
        one_hot = torch.nn.functional.one_hot(label(scope), classes(scope.sizes))
        return one_hot.to(DTYPE)[..., None]

    return run


def _squared_error(node):
    """1/2 ||o - y||^2 of each sample, (B,)."""
    prediction, target = compiled(node.prediction), compiled(node.target)

    def run(scope):
        gap = prediction(scope) - target(scope)
        return 0.5 * (gap**2).sum(dim=(-2, -1))

    return run


def _cross_entropy(node):
    """-log softmax(s)[y] of each sample, (B,), for integer labels y."""
    prediction, target = compiled(node.prediction), compiled(node.target)

    def run(scope):
        scores = prediction(scope)[..., 0]
        labels = target(scope)
        return torch.logsumexp(scores, dim=-1) - scores.gather(-1, labels[:, None])[:, 0]

    return run


def _symbol(node):
    """The argument of a scalar form, or a size."""

    def run(scope):
        if node in scope.symbols:
            return scope.symbols[node]
        if node in scope.sizes:
            return float(scope.sizes[node])
        raise OracleError(f"unknown symbol {node}")

    return run


def _as_tensor(value):
    return value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=DTYPE)


def _max(node):
    """Max(a, b, ...) elementwise (relu, leaky relu)."""
    args = [compiled(arg) for arg in node.args]
    return lambda scope: reduce(torch.maximum, [_as_tensor(arg(scope)) for arg in args])


def _min(node):
    """Min(a, b, ...) elementwise."""
    args = [compiled(arg) for arg in node.args]
    return lambda scope: reduce(torch.minimum, [_as_tensor(arg(scope)) for arg in args])


def _heaviside(node):
    """Heaviside(z, h0): 1 for z > 0, h0 at 0, 0 below."""
    z = compiled(node.args[0])
    at_zero = compiled(node.args[1]) if len(node.args) > 1 else _constant(0.5)

    def run(scope):
        value = _as_tensor(z(scope))
        return torch.where(value > 0, 1.0, torch.where(value == 0, at_zero(scope), 0.0)).to(DTYPE)

    return run


def _piecewise(node):
    """Piecewise((e1, c1), (e2, c2), ..., (en, True)): the first branch whose condition holds."""
    branches = [(compiled(branch), compiled(condition)) for branch, condition in reversed(node.args)]

    def run(scope):
        value = torch.tensor(float("nan"), dtype=DTYPE)  # where no condition holds
        for branch, condition in branches:
            value = torch.where(_as_tensor(condition(scope)), _as_tensor(branch(scope)), value)
        return value

    return run


def _true(node):
    """The condition True of a Piecewise's last branch."""
    return lambda scope: torch.tensor(True)


def _relation(compare):
    def rule(node):
        """A comparison z > 0 in a Piecewise condition."""
        lhs, rhs = compiled(node.lhs), compiled(node.rhs)
        return lambda scope: compare(lhs(scope), rhs(scope))

    return rule


def _function(torch_function):
    def rule(node):
        """A SymPy scalar function (tanh, exp, log, Abs) by its torch counterpart."""
        arg = compiled(node.args[0])
        return lambda scope: torch_function(_as_tensor(arg(scope)))

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
