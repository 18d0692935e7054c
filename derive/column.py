"""Column-vector nodes that take scalars in sums, as the maths writes them:
`1 - z_t` means the vector 1 - z_t (SymPy alone refuses a scalar plus a matrix)."""

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixExpr
from sympy.matrices.expressions.special import OneMatrix


class Column(MatrixExpr):
    """A MatrixExpr of shape (n, 1) whose sums with a scalar c read c as c times the ones vector."""

    def _column(self, other):
        other = sp.sympify(other)
        return other if isinstance(other, MatrixExpr) else other * OneMatrix(*self.shape)

    def __add__(self, other):
        return MatrixExpr.__add__(self, self._column(other))

    def __radd__(self, other):
        return MatrixExpr.__radd__(self, self._column(other))

    def __sub__(self, other):
        return MatrixExpr.__sub__(self, self._column(other))

    def __rsub__(self, other):
        return MatrixExpr.__rsub__(self, self._column(other))
