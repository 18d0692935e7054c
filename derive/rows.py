"""Rows a:b of a vector expression, the slice pushed down to the leaves: (diag(u) W h_dot)[a:b] is
diag(u[a:b]) W[a:b, :] h_dot, and tanh(z_t)[a:b] is tanh(z_t[a:b]). Forward mode needs this for a slice of
a sequence's value, a_t[a:b, :], whose tangent is the rows a:b of a_t's tangent, each term still a left
multiple of one Tangent."""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.elementwise import Apply
from bptt.derive.nodes import Diag, equal


def rows_of(expr, start, stop):
    """expr[start:stop, :] with the slice on the leaves (parameters, values, tangents)."""
    if start == 0 and equal(stop, expr.shape[0]):
        return expr
    if isinstance(expr, sp.MatAdd):
        return sp.MatAdd(*(rows_of(term, start, stop) for term in expr.args)).doit(deep=False)
    if isinstance(expr, sp.MatMul):
        return _product_rows(expr, start, stop)
    if isinstance(expr, sp.HadamardProduct):
        return sp.HadamardProduct(*(rows_of(factor, start, stop) for factor in expr.args))
    if isinstance(expr, sp.HadamardPower):
        return sp.HadamardPower(rows_of(expr.base, start, stop), expr.exp)
    if isinstance(expr, Apply):
        return Apply(expr.function, rows_of(expr.arg, start, stop))
    if isinstance(expr, (OneMatrix, sp.ZeroMatrix)):
        return type(expr)(stop - start, expr.shape[1])
    return sp.MatrixSlice(expr, (start, stop, 1), (0, expr.shape[1], 1))


def _product_rows(product, start, stop):
    """(c F_1 F_2 ...)[a:b] = c F_1[a:b, :] F_2 ...; a leading diag(u) keeps its rows of u and passes the
    slice on: (diag(u) F)[a:b] = diag(u[a:b]) F[a:b]."""
    coeff, factors = product.as_coeff_matrices()
    first, rest = factors[0], factors[1:]
    if isinstance(first, Diag) and rest:
        tail = sp.MatMul(*rest).doit(deep=False) if len(rest) > 1 else rest[0]
        return sp.MatMul(coeff, Diag(rows_of(first.vector, start, stop)), rows_of(tail, start, stop)).doit(deep=False)
    return sp.MatMul(coeff, rows_of(first, start, stop), *rest).doit(deep=False)
