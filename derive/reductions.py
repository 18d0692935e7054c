"""Reductions over the units of a vector, one entry each in the registry's style: `mean(v)` and `sum(v)` of an
n x 1 column are 1 x 1 values, which broadcast as scalars do: `v - mean(v)` is v - 1 mean(v), with 1 the
ones column of v's rows (column.py). Each entry holds the maths only: its SymPy form over the entries, its
adjoint rule, its LaTeX; each backend's printer maps the entry's kind to its code (a sum over the last axis,
O(n), never a product with a matrix of ones).

The adjoint of v in s = sum(v) is 1 s_bar (the scalar adjoint broadcast over v's rows); in m = mean(v),
1 m_bar / n. Both are a matrix of ones times the 1 x 1 adjoint, which the code prints as a broadcast.
"""

from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp
from sympy.core.symbol import Str
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.column import Column
from bptt.derive.model_error import ModelError


class ReductionError(ModelError):
    """A reduction of something that is not a column vector."""


def reduction_kind(name):
    """The key of the reduction `name`'s code in every backend's table (Reduction.kind)."""
    return ("reduction", name)


@dataclass(frozen=True)
class Reduction:
    """One reduction r over the rows of a column vector v (n x 1), giving a 1 x 1 value.

    scalar: r as a SymPy function of the list of v's entries (the exact proofs and the oracle unroll with it).
    scale: r(v) = scale(n) * sum(v): linear, so its adjoint is 1 g scale(n) and its tangent scale(n) 1^T v_dot.
    latex: the reduction's name in LaTeX, e.g. r"\\operatorname{mean}".
    """

    name: str
    scalar: Callable
    scale: Callable
    latex: str
    constants: tuple = ()

    @property
    def kind(self):
        """The key of the reduction's code in every backend's table: ("reduction", its name), which no elementwise
        function's key (a string) is, so that a user's function named mean or sum keeps its own code."""
        return reduction_kind(self.name)

    def adjoint(self, v, g):
        """dL/dv for the 1 x 1 adjoint g of r(v): g broadcast over v's rows, times scale(n)."""
        rows = v.shape[0]
        return sp.MatMul(self.scale(rows), OneMatrix(rows, 1), g).doit(deep=False)

    def tangent(self, term):
        """The tangent of r(v) along a term of v's tangent: scale(n) 1^T term (a left multiple of it)."""
        rows = term.shape[0]
        return sp.MatMul(self.scale(rows), OneMatrix(1, rows), term).doit(deep=False)


class Reduce(Column):
    """A reduction of a column vector: mean(v), sum(v), of shape 1 x 1."""

    def __new__(cls, name, arg):
        return Column.__new__(cls, name if isinstance(name, Str) else Str(name), arg)

    reduction = property(lambda self: REDUCTIONS[self.args[0].name])
    name = property(lambda self: self.args[0].name)
    arg = property(lambda self: self.args[1])
    shape = property(lambda self: (sp.S.One, sp.S.One))

    def _eval_transpose(self):
        return self


REDUCTIONS = {}


def register_reduction(entry):
    """Add a reduction; returns its constructor `r(v) -> Reduce`, which checks that v is a column vector."""
    REDUCTIONS[entry.name] = entry

    def reduce(v):
        if not isinstance(v, sp.MatrixExpr) or v.shape[1] != 1:
            shape = f"shape {v.shape[0]} x {v.shape[1]}" if isinstance(v, sp.MatrixExpr) else f"the scalar {v}"
            raise ReductionError(f"{entry.name}(v) reduces a column vector, not {shape}")
        return Reduce(entry.name, v)

    reduce.__name__ = entry.name
    return reduce


mean = register_reduction(
    Reduction("mean", lambda entries: sp.Add(*entries) / len(entries), lambda n: 1 / n, r"\operatorname{mean}")
)
sum = register_reduction(Reduction("sum", lambda entries: sp.Add(*entries), lambda n: sp.S.One, r"\operatorname{sum}"))  # noqa: A001 (the maths' name)
