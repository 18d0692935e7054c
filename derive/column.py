"""Scalars in sums of column vectors, as the maths writes them: `1 - z_t` and `W x_t + U h_{t-1} + 1`
mean the scalar times the ones vector, and a 1 x 1 value (a reduction, `v - mean(v)`) in such a sum means
the ones vector times it.

SymPy refuses a scalar plus a matrix (`TypeError: Mix of Matrix and Scalar symbols`), and a sum such as
`W x_t + U h_{t-1}` is SymPy's own MatAdd, built before the model sees it. So SymPy's matrix operators
`+` and `-` read a scalar operand as c times the ones vector when the matrix side is a column vector that
holds a node of the model language (a Column: a sequence value, an elementwise function). Every other
expression behaves as SymPy's own.
"""

import functools

import sympy as sp
from sympy.core.sympify import SympifyError
from sympy.matrices import MatrixBase
from sympy.matrices.expressions.matexpr import MatrixExpr
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive import canonical  # noqa: F401 (every matrix operator's canonical form remembered)


class Column(MatrixExpr):
    """A node of the model language of shape (n, 1): a scalar in a sum with it means that scalar times ones."""


def scalar_as_column(expr, other):
    """other as other * 1 (the ones vector of expr's shape) if it is a scalar and expr a column vector
    holding a Column node; else other unchanged."""
    if isinstance(other, (MatrixExpr, MatrixBase)) or expr.shape[1] != 1:
        return other
    try:
        scalar = sp.sympify(other, strict=True)
    except SympifyError:
        return other
    if not isinstance(scalar, sp.Expr) or not scalar.is_commutative:
        return other
    if not _holds_column(expr):
        return other
    return scalar * OneMatrix(*expr.shape)


def broadcast(expr, other):
    """A 1 x 1 value (a reduction, mean(v)) in a sum with a column vector of n rows, as 1 times it: the ones
    column of n rows times the 1 x 1 matrix; expr unchanged otherwise."""
    if not (isinstance(expr, MatrixExpr) and isinstance(other, MatrixExpr)) or expr.shape != (1, 1):
        return expr
    rows = other.shape[0]
    if other.shape[1] != 1 or rows == 1 or not _holds_column(expr):
        return expr
    return sp.MatMul(OneMatrix(rows, 1), expr)


def _holds_column(expr):
    return any(isinstance(node, Column) for node in sp.preorder_traversal(expr))


def _reading_scalars(method):
    @functools.wraps(method)
    def operator(self, other):
        other = scalar_as_column(self, other)
        return method(broadcast(self, other), broadcast(other, self))

    return operator


for _name in ("__add__", "__radd__", "__sub__", "__rsub__"):
    setattr(MatrixExpr, _name, _reading_scalars(getattr(MatrixExpr, _name)))


def _scaling(method, reflected=False):
    """v * m, m * v and v / m for a 1 x 1 value m that holds a Column (sigma) and a column v of n rows: the
    elementwise product with 1 m (or 1 m^(-1)), as a scalar scales a vector; SymPy's own product otherwise.
    v / m for a v of one row is v * m^(-1) elementwise too, where SymPy's would be the matrix product v m^(-1)
    (the same number, but a product by v, which no adjoint rule takes): a norm over one unit, v_hat = v / sigma."""

    @functools.wraps(method)
    def operator(self, other):
        if method.__name__ == "__truediv__" and _divides_one_row(self, other):
            return sp.HadamardProduct(self, sp.HadamardPower(other, -1))
        if isinstance(other, MatrixExpr) and broadcast(self, other) is not self:
            m, v = self, other
        elif isinstance(other, MatrixExpr) and broadcast(other, self) is not other:
            m, v = other, self
        else:
            return method(self, other)
        if method.__name__ == "__truediv__":
            if m is not other:
                return method(self, other)  # m / v: no elementwise meaning given here
            m = sp.HadamardPower(m, -1)
        return sp.HadamardProduct(v, broadcast(m, v))

    return operator


def _divides_one_row(v, m):
    """Whether v / m divides a 1 x 1 value v by a 1 x 1 value m that holds a Column."""
    return isinstance(v, MatrixExpr) and isinstance(m, MatrixExpr) and v.shape == m.shape == (1, 1) and _holds_column(m)


for _name in ("__mul__", "__rmul__", "__truediv__"):
    setattr(MatrixExpr, _name, _scaling(getattr(MatrixExpr, _name)))
