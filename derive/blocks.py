"""Blocks of a parameter: a model may read a slice W[a:b, c:d] of a parameter, as torch stacks
its gates' weights in one matrix (W_ih holds W_ii, W_if, W_ig, W_io, each h rows); and a slice
a_t[a:b, :] of a sequence's value (consecutive rows), as Ba et al. split a normalised 4h pre-activation
into the four gates.

The adjoint rule of a slice: its adjoint lands in its block of the parameter's gradient (of dL/da_t),
zero elsewhere (`Placed`): dL/da_t is the stack of its slices' adjoints, zero in the rows no slice reads.
A parameter's gradient is then its whole uses' sum over time plus, per block,
the sum over time of that block's adjoint: `whole + Placed(sum_t g_1, block_1) + ...`.
"""

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixExpr

from bptt.derive.nodes import SeqAt
from bptt.derive.refusal import Refusal
from bptt.derive.text import notation


class SliceError(Refusal):
    """A slice the tool has no rule for."""


def check_block(node):
    if not isinstance(node.parent, (sp.MatrixSymbol, SeqAt)):
        raise SliceError(
            f"the block {notation(node)} has no adjoint rule: only a block of a parameter or rows of a sequence's "
            "value have one",
            node,
        )
    if node.rowslice[2] != 1 or node.colslice[2] != 1:
        raise SliceError(
            f"the block {notation(node)} has no adjoint rule: a block takes consecutive rows and columns", node
        )


class Placed(MatrixExpr):
    """The matrix of the parameter's (the value's) shape that is `value` in the rows and columns of `block` and zero
    elsewhere."""

    def __new__(cls, value, block):
        return MatrixExpr.__new__(cls, value, block)

    value, block = (property(lambda self, i=i: self.args[i]) for i in range(2))
    shape = property(lambda self: self.args[1].parent.shape)


def split(gradient):
    """(whole, [Placed]) of a gradient: the terms that are not placed, and one Placed per block
    (terms of the same block merged), in the order of their first row and column."""
    terms = gradient.args if isinstance(gradient, sp.MatAdd) else (gradient,)
    whole, blocks = [], {}
    for term in terms:
        if isinstance(term, Placed):
            blocks.setdefault(term.block, []).append(term.value)
        else:
            whole.append(term)
    placed = [Placed(_sum(values), block) for block, values in blocks.items()]
    return whole, sorted(placed, key=lambda p: sp.default_sort_key((p.block.rowslice, p.block.colslice)))


def sum_over_time(gradient, index, start, end, time_sum):
    """sum_t of a per-step gradient, the sum taken inside each Placed block: sum_t whole + Placed(sum_t g, block)."""
    whole, placed = split(gradient)
    terms = [time_sum(_sum(whole), index, start, end)] if whole else []
    terms += [Placed(time_sum(p.value, index, start, end), p.block) for p in placed]
    return _sum(terms)


def _sum(terms):
    return sp.MatAdd(*terms).doit(deep=False) if len(terms) > 1 else terms[0]
