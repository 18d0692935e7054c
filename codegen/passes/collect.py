"""Fewer elementwise operations in the forward loop: a step's sum of products, collected by a common factor.

Elementwise algebra is the algebra of numbers, entry by entry. So a loop statement's value is read as a
scalar expression (each value it multiplies or adds, h_{t-1}, tanh(c_t), W x_t, a leaf), expanded and
collected by each leaf in turn; the form with the fewest operations is kept when it has fewer than the
model's. The GRU's h_t = (1 - z_t) * n_t + h_{t-1} * z_t becomes n_t + z_t * (h_{t-1} - n_t), three
calls for four (as torch.nn.GRU computes it).
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.ir import Assign, the_loop, with_body
from bptt.derive.atoms import atoms
from bptt.derive.nodes import SeqAt
from bptt.derive.text import text

LARGEST = 12  # operations: a larger value is left as it is (its expansion could grow without bound)


def collected_products(program):
    """The Program with each Assign of an elementwise value in its forward loop in its cheapest collected form."""
    forward = program.forward
    loop = the_loop(forward.statements)
    if loop is None:
        return program
    inside = [_collected(s) if isinstance(s, Assign) and isinstance(s.target, SeqAt) else s for s in loop.body]
    return replace(program, forward=with_body(forward, inside))


def _collected(statement):
    if statement.target in atoms(statement.value, SeqAt):
        return statement  # it reads what it writes: in place, the order of its terms matters
    leaves = {}
    scalar = _scalar(statement.value, leaves)
    if not leaves or _cost(scalar) > LARGEST:
        return statement
    expanded = sp.expand(scalar)
    forms = [expanded] + [sp.collect(expanded, leaf) for leaf in sorted(leaves.values(), key=lambda s: s.name)]
    best = min(forms, key=_cost)
    if _cost(best) >= _cost(scalar):
        return statement
    value = _matrix(best, {v: k for k, v in leaves.items()}, statement.target.rows)
    return replace(statement, value=value, comment=f"{statement.comment} = {text(value)}")


def _scalar(expr, leaves):
    """expr as a scalar expression; leaves: {matrix leaf: its symbol}, filled in."""
    if isinstance(expr, sp.MatAdd):
        return sp.Add(*(_scalar(arg, leaves) for arg in expr.args))
    if isinstance(expr, sp.HadamardProduct):
        return sp.Mul(*(_scalar(arg, leaves) for arg in expr.args))
    if isinstance(expr, sp.HadamardPower) and expr.exp.is_Integer:
        return _scalar(expr.base, leaves) ** expr.exp
    if isinstance(expr, sp.OneMatrix):
        return sp.S.One
    if isinstance(expr, sp.MatMul):
        coeff, factors = expr.as_coeff_matrices()
        if len(factors) == 1:
            return coeff * _scalar(factors[0], leaves)
    if expr not in leaves:
        leaves[expr] = sp.Symbol(f"_leaf{len(leaves)}")
    return leaves[expr]


def _matrix(expr, leaves, rows):
    """A scalar expression back as elementwise matrix algebra over the leaves ({symbol: matrix leaf})."""
    if expr.is_Add:
        return sp.MatAdd(*(_matrix(arg, leaves, rows) for arg in expr.args)).doit(deep=False)
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        factors = [_matrix(f, leaves, rows) for f in sp.Mul.make_args(rest)]
        product = sp.HadamardProduct(*factors).doit(deep=False) if len(factors) > 1 else factors[0]
        return product if coeff == 1 else coeff * product
    if expr.is_Pow:
        return sp.HadamardPower(_matrix(expr.base, leaves, rows), expr.exp)
    if expr.is_Number:
        return expr * sp.OneMatrix(rows, 1) if expr != 1 else sp.OneMatrix(rows, 1)
    return leaves[expr]


def _cost(expr):
    """The elementwise operations of a scalar expression: one per + (a - b is one), *, power; a coefficient
    other than -1 is one more."""
    if expr.is_Add:
        return len(expr.args) - 1 + sum(_cost(arg) for arg in expr.args)
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        factors = sp.Mul.make_args(rest)
        return len(factors) - 1 + (coeff not in (1, -1)) + sum(_cost(f) for f in factors)
    if expr.is_Pow:
        return 1 + _cost(expr.base)
    return 0
