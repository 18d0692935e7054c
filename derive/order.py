"""The order in which every printer, LaTeX or code, writes the terms of a sum."""

import functools

import sympy as sp

from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj, SeqAt
from bptt.derive.written import WrittenSum


@functools.lru_cache(maxsize=8192)  # every printer sorts the same terms, each sum every time it is printed
def term_order(term):
    """Constants first, then later time steps first (h_{t+1} before o_t before
    h_{t-1}), then positive terms before negative ones."""
    negative = isinstance(term, sp.MatMul) and bool(term.args[0].is_negative)
    indexed = atoms(term, SeqAt, Adj)
    if not indexed:
        return (0, 0, negative)
    times = [a.time if isinstance(a, SeqAt) else a.of.time for a in indexed]
    offset = max(sp.sympify(time).as_coeff_Add()[0] for time in times)  # the latest: t+1 -> 1, h_0 -> 0
    return (1, -int(offset), negative)


def printed_terms(expr):
    """A sum's terms in the order printed: as its author wrote them (derive/written.py), else term_order's."""
    return expr.args if isinstance(expr, WrittenSum) else sorted(expr.args, key=term_order)
