"""Returned gradients never share memory: with each other, the workspace, the cache or the parameters.

A gradient computed by its own expression is a fresh array. One that only reads an array is a view of it:
a gate's rows of a stacked gradient (Rows), or an adjoint, value or parameter as it is. torch's two biases
of a gate have one gradient, so both would view the same rows; with clip_grad_norm_ that memory is scaled
twice, and a second backward() adds into it twice; the gates' rows of one product would share one torch
storage. So every view becomes an ir.Copy, printed by each backend as its copy, except the one view of a
product computed for that gradient alone: each returned gradient owns its memory.
"""

import sympy as sp

from bptt.derive.nodes import Adj, SeqAt

from .ir import Copy, Rows, adjoint_array


def fresh_returns(returns, initial, window_initial, products):
    """(returns, initial, window_initial) with a Copy around each value that is a view: of a gradient
    product that other returns view too, or of a work array, a cached value or a parameter.
    products: the names of the gradient products computed for this call (the gradients pass)."""
    views = [_viewed_array(value) for _, value, _ in returns]

    def fresh(value):
        array = _viewed_array(value)
        if array is None or (array in products and views.count(array) == 1):
            return value  # computed, or the one view of a product made for it
        return Copy(value)

    returns = [(key, fresh(value), comment) for key, value, comment in returns]
    initial = [type(i)(i.key, fresh(i.value), i.weighted, i.comment) for i in initial]
    window_initial = [type(i)(i.key, fresh(i.value), i.weighted, i.comment) for i in window_initial]
    return returns, initial, window_initial


def _viewed_array(value):
    """The name of the array value is a view of, or None when it is computed."""
    if isinstance(value, Rows):
        return _viewed_array(value.matrix)
    if isinstance(value, Adj):
        return adjoint_array(value.of.name)
    if isinstance(value, SeqAt):
        return value.name
    if isinstance(value, sp.MatrixSymbol):
        return value.name
    return None
