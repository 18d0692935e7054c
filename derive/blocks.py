"""Blocks of a parameter: a model may read a slice W[a:b, c:d] of a parameter, as torch stacks
its gates' weights in one matrix (W_ih holds W_ii, W_if, W_ig, W_io, each h rows); and a slice
a_t[a:b, :] of a sequence's value (consecutive rows), as Ba et al. split a normalised 4h pre-activation
into the four gates.

The adjoint rule of a slice: its adjoint lands in its block of the parameter's gradient (of dL/da_t),
zero elsewhere (`Placed`): dL/da_t is the stack of its slices' adjoints, zero in the rows no slice reads.
A parameter's gradient is then its whole uses' sum over time plus, per block,
the sum over time of that block's adjoint: `whole + Placed(sum_t g_1, block_1) + ...`.

A slice is SymPy's, written a_t[i:j, :] or W[i:j, k:l] (a negative end counted from the last row, as Python's), and
a block takes consecutive rows i:j (and columns k:l) with 0 <= i < j <= its rows (takes(), the one place that says
so). SymPy refuses a slice out of range, empty or reversed with a bare IndexError as it is made, in the user's
function; so MatrixExpr's [] (below) refuses it there in the user's notation: which slice, what it does wrong, what
a slice takes. A step other than 1 is refused when the block is derived (check_block).
"""

import functools

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixExpr

from bptt.derive.model_error import ModelError
from bptt.derive.nodes import SeqAt
from bptt.derive.refusal import Refusal
from bptt.derive.text import notation


class SliceError(Refusal):
    """A slice the tool has no rule for."""


class SliceRangeError(ModelError, IndexError):
    """A slice out of its value's rows or columns, empty or reversed: a bad model for the app, the IndexError SymPy
    raises for its own callers."""


def takes(parent):
    """What a block of parent takes, in words: `consecutive rows i:j with 0 <= i < j <= 2*h`."""
    rows, cols = parent.shape
    words = f"consecutive rows i:j with 0 <= i < j <= {notation(rows)}"
    return words if cols == 1 else f"{words} and columns k:l with 0 <= k < l <= {notation(cols)}"


def check_block(node):
    """Refuse a block the adjoint rules cannot place in its parent's rows and columns (SliceError)."""
    if not isinstance(node.parent, (sp.MatrixSymbol, SeqAt)):
        raise SliceError(
            f"the block {notation(node)} has no adjoint rule: only a block of a parameter or rows of a sequence's "
            "value have one",
            node,
        )
    if node.rowslice[2] != 1 or node.colslice[2] != 1:
        raise SliceError(f"the block {notation(node)} has no adjoint rule: a block takes {takes(node.parent)}", node)


def _slicing(getitem):
    """MatrixExpr's [] with a slice that SymPy refuses (a bare IndexError) refused in words: SliceRangeError."""

    @functools.wraps(getitem)
    def sliced(self, key):
        try:
            return getitem(self, key)
        except IndexError:
            parts = (key, slice(None)) if isinstance(key, slice) else key  # a_t[i:j] is a_t[i:j, :], as SymPy reads it
            if not (isinstance(parts, tuple) and len(parts) == 2 and any(isinstance(p, slice) for p in parts)):
                raise  # not a slice (an entry W[i, j], W[k]): SymPy's own words
            raise SliceRangeError(_out_of_range(self, key, parts)) from None

    return sliced


MatrixExpr.__getitem__ = _slicing(MatrixExpr.__getitem__)


def _out_of_range(parent, key, parts):
    """`the slice a_t[h:3*h, :] ends past the 2*h rows of a_t: a slice takes consecutive rows ...`, of parent[key]
    (parts: the key's rows and columns)."""
    name = notation(parent)
    written = f"{name}[{', '.join(_written(part) for part in (key if isinstance(key, tuple) else (key,)))}]"
    faults = [_fault(part, size, axis, name) for part, size, axis in zip(parts, parent.shape, AXES, strict=True)]
    fault = next((fault for fault in faults if fault), "is out of range")
    return f"the slice {written} {fault}: a slice takes {takes(parent)}"


AXES = ("row", "column")


def _written(part):
    """One axis of a slice as the user wrote it: `h:3*h`, `:`, `::2`, `0`."""
    if not isinstance(part, slice):
        return notation(sp.sympify(part))
    ends = [part.start, part.stop] + ([part.step] if part.step is not None else [])
    return ":".join("" if end is None else notation(sp.sympify(end)) for end in ends)


def _fault(part, size, axis, name):
    """What one axis of a slice of the value `name` does wrong, in words, where that is decided (else None). Read
    as SymPy reads it: a negative end counted from the end, an index i the slice i:i+1."""
    if isinstance(part, slice):
        start, stop = (sp.sympify(end) for end in (part.start or 0, size if part.stop is None else part.stop))
        start, stop = (end + size if _true(end < 0) else end for end in (start, stop))
    else:
        start = sp.sympify(part) + (size if _true(sp.sympify(part) < 0) else 0)
        stop = start + 1
    step = sp.sympify(getattr(part, "step", None) or 1)
    whole = f"the one {axis} of {name}" if size == 1 else f"the {notation(size)} {axis}s of {name}"
    if _true(step < 1):
        return f"takes none of {whole} (its step goes back)"
    if stop == start:
        return f"takes none of {whole}"
    if _true(stop < start):
        return f"takes none of {whole} (it ends before it starts)"
    if _true(start < 0):
        return f"starts before the first of {whole}"
    if _true(stop > size):
        return f"ends past {whole}"
    return None


def _true(relation):
    """Whether a comparison of sizes is decided true (SymPy's Relational, or a bool)."""
    return relation == True  # noqa: E712 (a Relational undecided by the sizes' assumptions is not True)


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
