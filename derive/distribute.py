"""Products by a sum of matrices, distributed: (W - W^T - c I) h = W h - W^T h - c h.

The derivation keeps the sum whole, as the paper writes it (AntisymmetricRNN's W - W^T - gamma I); the generated
code multiplies by one matrix at a time, so codegen derives the model with its products distributed, each
term a product by a parameter, its transpose or a block of one (the identity dropped, a matrix of ones kept).
"""

import dataclasses
import functools

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixExpr


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
