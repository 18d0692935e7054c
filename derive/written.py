"""The order in which a user wrote the terms of each sum and the factors of each elementwise product.

SymPy sorts both as it builds them (`W * x() + U * h(t - 1)` is stored as `U h_{t-1} + W x_t`), so that equal
expressions are equal. While a model's function runs (`built`), every matrix sum and product it writes is noted:
the sorted node, with its terms as written. The model keeps that table (Model.written), and `as_written` gives
an expression back with those nodes in the written order, for the document to print the model as its author
wrote it. Every derivation reads the sorted expressions: nothing else changes.
"""

import contextvars
import dataclasses
from collections import Counter

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixExpr

from bptt.derive.canonical import fresh
from bptt.derive.column import broadcast, scalar_as_column

_TABLE = contextvars.ContextVar("written", default=None)  # {sorted node: its terms as written}, while noting
_SUMS = ("__add__", "__radd__", "__sub__", "__rsub__")
_OPERATORS = (*_SUMS, "__mul__", "__rmul__", "__matmul__", "__rmatmul__")


class WrittenSum(sp.MatAdd):
    """A sum whose terms are in the order written (never sorted by a printer)."""


class WrittenProduct(sp.HadamardProduct):
    """An elementwise product whose factors are in the order written."""


def built(factory):
    """factory() (a function returning a Model), with its sums and products noted as written."""
    table = {}
    token = _TABLE.set(table)
    try:
        with fresh():
            model = factory()
    finally:
        _TABLE.reset(token)
    return dataclasses.replace(model, written=tuple(table.items())) if table else model


def as_written(expr, written):
    """expr with every node that `written` (Model.written) holds in the order it was written."""
    table = dict(written)
    return _rewrite(expr, table) if table else expr


def _rewrite(expr, table):
    if not any(node in table for node in sp.preorder_traversal(expr)):
        return expr
    if expr in table:
        kind = WrittenSum if isinstance(expr, sp.MatAdd) else WrittenProduct
        return kind(*(_rewrite(arg, table) for arg in table[expr]))
    return expr.func(*(_rewrite(arg, table) for arg in expr.args))


def note_replaced(replaced):
    """While noting: each noted sum or product that holds a replaced node ({node: its replacement}, a norm by its
    value) noted again as it reads once replaced, its terms in the written order, each replacement in its term's
    place (a model's expansion of its norms, derive/norms.py, keeps the order its author wrote)."""
    table = _TABLE.get()
    if table is None:
        return
    for node, terms in list(table.items()):
        if any(node.has(old) for old in replaced):
            _note(node.xreplace(replaced), [term.xreplace(replaced) for term in terms])


def _terms(expr, kind):
    """The terms (kind MatAdd) or factors (HadamardProduct) of an operand as written, nested ones flattened."""
    if not isinstance(expr, kind):
        return [expr]
    args = _TABLE.get().get(expr, expr.args)
    return [term for arg in args for term in _terms(arg, kind)]


def _note(node, written):
    """Keep written as the order of node, a sum or an elementwise product with the same terms."""
    canonical = [sp.sympify(term).doit() for term in written]
    if Counter(canonical) == Counter(node.args):
        _TABLE.get().setdefault(node, tuple(canonical))


def _note_operands(*operands):
    """The sums and elementwise products a user built by hand inside the operands, which SymPy sorts once they are
    an operand (HadamardProduct(r, h) in U * HadamardProduct(r, h))."""
    for operand in operands:
        if isinstance(operand, sp.Basic):
            for node in sp.preorder_traversal(operand):
                if isinstance(node, (sp.MatAdd, sp.HadamardProduct)) and node.doit() != node:
                    _note(node.doit(), _terms(node, type(node)))


def _noting(name, operator):
    def noted(self, other):
        result = operator(self, other)
        if _TABLE.get() is None:
            return result
        if name in _SUMS:  # 1 - z_t: the ones vector minus z_t; mean(v) + z_t: 1 mean(v) + z_t, as column.py sums
            other = scalar_as_column(self, other)
            self, other = broadcast(self, other), broadcast(other, self)
        _note_operands(self, other)
        if isinstance(result, sp.MatAdd) and name in _SUMS:
            first, second = (other, self) if name.startswith("__r") else (self, other)
            terms = _terms(first, sp.MatAdd)
            if name.endswith("sub__"):
                terms += [-term for term in _terms(second, sp.MatAdd)]
            else:
                terms += _terms(second, sp.MatAdd)
            _note(result, terms)
        return result

    return noted


for _name in _OPERATORS:
    setattr(MatrixExpr, _name, _noting(_name, getattr(MatrixExpr, _name)))
