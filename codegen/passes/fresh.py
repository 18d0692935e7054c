"""Returned gradients never share memory: with each other, the workspace, the cache or the parameters.

A gradient computed by its own expression is a fresh array. One that only reads an array is a view of it:
a gate's rows of a stacked gradient product (ir.Rows), or an adjoint, a value or a parameter as it is.
torch's two biases of a gate have one gradient, so both would view the same rows: with clip_grad_norm_ that
memory is scaled twice, and a second backward() adds into it twice. So a view of rows that an earlier
return views already, and a view of anything but a gradient product of this call, becomes an ir.Copy,
printed by each backend as its copy. Views of disjoint rows of one product share no memory (NumPy's
np.shares_memory); a torch tensor's storage is the whole product, so torch/backward.py copies those too.
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Copy, Rows
from bptt.derive.nodes import Adj, SeqAt


def fresh_returns(program):
    """The Program with a Copy around each returned value (a gradient, dL/dS_0 in either pass) that views memory
    another return views, or a work array, a cached value or a parameter; the products it may view are the
    gradient products computed for this call (program.gradients). owned_returns: the returns with every rows
    view copied too (_shared_rows)."""
    products = {statement.target.name for statement in program.gradients.statements}
    taken = []  # (array, first row, end row) of the views returned so far

    def fresh(value):
        view = _view(value)
        if view is None:
            return value
        array, first, end = view
        if array not in products or any(a == array and _overlap((first, end), (f, e)) for a, f, e in taken):
            return Copy(value)
        taken.append(view)
        return value

    returns = tuple((key, fresh(value), comment) for key, value, comment in program.returns)
    initial = tuple(replace(i, value=fresh(i.value)) for i in program.initial)
    window_initial = tuple(replace(i, value=fresh(i.value)) for i in program.window_initial)
    owned = tuple((key, _shared_rows(value), comment) for key, value, comment in returns)
    return replace(program, returns=returns, initial=initial, window_initial=window_initial, owned_returns=owned)


def _shared_rows(value):
    """A Copy of value if it is rows of a gradient product (which another return's rows may share)."""
    return Copy(value) if isinstance(value, Rows) else value


def _view(value):
    """(array name, first row, end row) of the array value is a view of, or None when it is computed."""
    if isinstance(value, Rows):
        array = _view(value.matrix)
        return None if array is None else (array[0], value.start, value.start + value.count)
    if isinstance(value, Adj):
        return adjoint_array(value.of.name), sp.S.Zero, value.shape[0]
    if isinstance(value, (SeqAt, sp.MatrixSymbol)):
        return value.name, sp.S.Zero, value.shape[0]
    return None


def _overlap(first, second):
    """Whether two row ranges may overlap (sizes are positive symbols; undecided counts as overlapping)."""
    apart = sp.Or(sp.Le(first[1], second[0]), sp.Le(second[1], first[0]))
    return apart is not sp.true
