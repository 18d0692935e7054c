"""Symbolic forward mode: the tangent of an expression as a list of terms,
each linear in exactly one `Tangent` (of a parameter: a direction; or of a state value).

For h = tanh(a): h_dot = diag(1 - h^2) a_dot. Terms are kept distributed, so
that the part linear in h_dot_{t-1} (the Jacobian) separates from the rest.
"""

from functools import lru_cache

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixExpr
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.adjoint import CONSTANTS, NoRule
from bptt.derive.elementwise import Apply, UnknownFunction, derivative, lookup, power
from bptt.derive.nodes import Diag, SeqAt
from bptt.derive.norms import Norm
from bptt.derive.reductions import Reduce
from bptt.derive.rows import rows_of
from bptt.derive.text import described


class Tangent(MatrixExpr):
    """The tangent of a parameter (a direction, e.g. W_dot) or of a state value h_dot_t."""

    def __new__(cls, of):
        return MatrixExpr.__new__(cls, of)

    of = property(lambda self: self.args[0])
    shape = property(lambda self: self.args[0].shape)


def _matmul(node, tangent):
    scalar, factors = node.as_coeff_matrices()
    terms = []
    for i, factor in enumerate(factors):
        for term in tangent(factor):
            terms.append(sp.MatMul(scalar, *factors[:i], term, *factors[i + 1 :]).doit(deep=False))
    return terms


def _scaled(vector, term):
    """diag(vector) term in canonical form: vector's own doit, the product flattened (term is built already,
    so it is not walked again)."""
    return sp.MatMul(Diag(_canonical(vector)), term).doit(deep=False)


@lru_cache(maxsize=4096)  # a slope or a Hadamard factor scales every term of its operand's tangent
def _canonical(vector):
    return vector.doit()


def _hadamard(node, tangent):
    terms = []
    for i, factor in enumerate(node.args):
        others = node.args[:i] + node.args[i + 1 :]
        other = others[0] if len(others) == 1 else sp.HadamardProduct(*others)
        terms += [_scaled(other, term) for term in tangent(factor)]
    return terms


def _slope(node, out):
    """f'(x) of an Apply node: the same along every direction, so derived once per function."""
    try:
        return _derived(node, out, lookup(node.function).derivative)
    except UnknownFunction as error:
        raise NoRule(str(error), node) from error


@lru_cache(maxsize=4096)
def _derived(node, out, rule):
    """derivative(node, out); `rule` (the registry's derivative) is in the key, so that a function
    registered again is derived again."""
    return derivative(node, out)


def _apply(node, tangent, out):
    slope = _slope(node, out)
    if isinstance(slope, sp.ZeroMatrix):  # a flat function (step): its value has no tangent
        return []
    if isinstance(slope, OneMatrix):  # identity
        return tangent(node.arg)
    return [_scaled(slope, term) for term in tangent(node.arg)]


def _power(node, tangent, out):
    """x^p elementwise: diag(p x^(p - 1)) x_dot."""
    try:
        slope = power(node.exp).derivative(node.base, out)
    except UnknownFunction as error:
        raise NoRule(str(error), node) from error
    if isinstance(slope, OneMatrix):
        return tangent(node.base)
    return [_scaled(slope, term) for term in tangent(node.base)]


def tangent_terms(expr, leaf, out=None):
    """The terms of d expr, where leaf(node) gives the terms for a SeqAt or parameter.

    `out` names expr's value (h_t for tanh(a_t)), as for the adjoint rules."""

    def tangent(node, name=None):
        if isinstance(node, (SeqAt, sp.MatrixSymbol)):
            return leaf(node)
        if isinstance(node, CONSTANTS) or not node.free_symbols:
            return []
        if isinstance(node, sp.MatAdd):
            return [term for arg in node.args for term in tangent(arg)]
        if isinstance(node, sp.MatMul):
            return _matmul(node, tangent)
        if isinstance(node, sp.Transpose):
            return [term.T for term in tangent(node.arg)]
        if isinstance(node, sp.HadamardProduct):
            return _hadamard(node, tangent)
        if isinstance(node, Apply):
            return _apply(node, tangent, name if name is not None else node)
        if isinstance(node, sp.HadamardPower):
            return _power(node, tangent, name if name is not None else node)
        if isinstance(node, Reduce):  # linear: mean(v)_dot = 1^T v_dot / n
            return [node.reduction.tangent(term) for term in tangent(node.arg)]
        if isinstance(node, Norm):
            return tangent(node.inline())
        if isinstance(node, sp.MatrixSlice) and not isinstance(node.parent, sp.MatrixSymbol):  # a_t[a:b, :]
            return [rows_of(term, *node.rowslice[:2]) for term in tangent(node.parent)]
        if isinstance(node, sp.MatrixSlice):  # the same block of the parameter's tangent
            return [sp.MatrixSlice(term, node.rowslice, node.colslice) for term in tangent(node.parent)]
        raise NoRule(f"{described(node)} has no forward-mode rule yet", node)

    return tangent(expr, out)
