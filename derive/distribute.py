"""The matrices a vector may be multiplied by, and products by a sum of them distributed:
(W - W^T - c I) h = W h - W^T h - c h.

The derivation keeps the sum whole, as the paper writes it (AntisymmetricRNN's W - W^T - gamma I); the generated
code multiplies by one matrix at a time, so codegen derives the model with its products distributed, each
term a product by a parameter, its transpose or a block of one (the identity dropped, a matrix of ones kept).
A factor of any other kind is refused by the derivation (coded_factor), so that `bptt latex` and `bptt codegen`
refuse the same cells with the same line.
"""

import dataclasses
import functools

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixExpr
from sympy.matrices.expressions.special import OneMatrix

FACTORS = "a parameter, a block of one, a parameter's transpose, the identity, ones, and their sums and products"


def coded_factor(factor, before_label=False):
    """Whether the generated code can multiply a vector by factor (FACTORS); before_label: it multiplies a one-hot
    vector, a lookup of a parameter's column (a parameter, its transpose, or the identity)."""
    if isinstance(factor, sp.MatAdd):
        return all(coded_factor(term, before_label) for term in factor.args)
    if isinstance(factor, sp.MatMul):
        factors = factor.as_coeff_matrices()[1]
        return all(coded_factor(f, before_label and k == len(factors) - 1) for k, f in enumerate(factors))
    if isinstance(factor, sp.Transpose) and isinstance(factor.arg, sp.MatAdd):
        return coded_factor(factor.arg, before_label)
    if isinstance(factor, sp.Transpose) or isinstance(factor, (sp.MatrixSymbol, sp.Identity)):
        return isinstance(getattr(factor, "arg", factor), (sp.MatrixSymbol, sp.Identity))
    return isinstance(factor, (sp.MatrixSlice, OneMatrix)) and not before_label


@functools.cache  # the same steps are asked of by the forward, backward and forward-mode statements
def distributed(expr):
    """expr with every matrix factor that is a sum written as the sum of the products by its terms, and the
    transpose of a sum as the sum of the transposes."""
    if not isinstance(expr, sp.Basic) or not expr.args:
        return expr
    args = tuple(distributed(arg) for arg in expr.args)
    node = expr if args == expr.args else expr.func(*args)
    if isinstance(node, sp.Transpose) and isinstance(node.arg, sp.MatAdd):
        return distributed(sp.MatAdd(*(sp.Transpose(term).doit(deep=False) for term in node.arg.args)))
    if isinstance(node, sp.MatMul):
        return _product(node)
    return node


def _product(node):
    """A product with its first matrix sum (not the vector last) distributed, and so on for the rest."""
    coeff, factors = node.as_coeff_matrices()
    at = next((k for k, factor in enumerate(factors[:-1]) if isinstance(factor, sp.MatAdd)), None)
    if at is None:
        return sp.MatMul(coeff, *factors).doit(deep=False)  # the identity dropped
    terms = [
        _product(sp.MatMul(coeff, *factors[:at], term, *factors[at + 1 :]).doit(deep=False))
        for term in factors[at].args
    ]
    return sp.MatAdd(*terms).doit(deep=False)


def distributed_model(model):
    """The model with every equation's products distributed (the loss reads outputs only, so it is kept)."""

    def each(pairs):
        return tuple((seq, distributed(rhs) if isinstance(rhs, MatrixExpr) else rhs) for seq, rhs in pairs)

    return dataclasses.replace(
        model, steps=each(model.steps), outputs=each(model.outputs), teacher_forcing=each(model.teacher_forcing)
    )
