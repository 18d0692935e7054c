"""Pieces of the NumPy in-place printer: scratch arrays and the shapes of a sum's terms (a constant,
a negated term, the term to compute first)."""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.codegen.ir import Array, Steps
from bptt.codegen.printing.printer import PrintError
from bptt.derive.nodes import Diag


class Scratch:
    """Scratch arrays by rows and kind (one step, or all steps), reused once a statement is done."""

    def __init__(self, used):
        self.arrays = {}  # name -> Array
        self.busy = set()
        self.used = used  # the printer's record of the arrays it reads

    def take(self, rows, stacked):
        label = str(rows).replace("*", "").replace(" ", "")
        base = f"_{'all' if stacked else 'step'}_{label}"
        for k in range(1, 100):
            name = base if k == 1 else f"{base}_{k}"
            if name not in self.busy:
                self.busy.add(name)
                self.used.add(name)
                self.arrays.setdefault(name, Array(name, rows, Steps.FROM_ONE if stacked else Steps.ONE))
                return name
        raise PrintError("too many scratch arrays in one statement")

    def release(self):
        self.busy.clear()


def constant(term):
    """c for a term c * 1 (the ones vector, or SymPy's I of 1 x 1 for a 1 x 1 sum's c: `1 + sum(v)`), else None."""
    if ones(term):
        return sp.S.One
    if isinstance(term, sp.MatMul):
        coeff, factors = term.as_coeff_matrices()
        if len(factors) == 1 and ones(factors[0]):
            return coeff
    return None


def ones(matrix):
    """Whether matrix is a column of ones: OneMatrix, or the 1 x 1 identity SymPy makes of c * OneMatrix(1, 1)."""
    return isinstance(matrix, OneMatrix) or (isinstance(matrix, sp.Identity) and matrix.shape == (1, 1))


def negated(term):
    """x for a term -x, else None."""
    if isinstance(term, sp.MatMul) and term.args[0] == -1:
        return sp.MatMul(*term.args[1:]).doit(deep=False) if len(term.args) > 2 else term.args[1]
    return None


def first_term(terms, self_ref):
    """The term computed straight into the target: what it holds already, else a matrix product, else a
    term that is not negated, else any that is not a constant."""
    held = [term for term in terms if term == self_ref]  # the term itself: the caller drops it by identity
    if self_ref is not None and held:
        return held[0]
    plain = [term for term in terms if negated(term) is None and constant(term) is None]
    for term in plain:
        if isinstance(term, sp.MatMul) and not all(isinstance(f, Diag) for f in term.args[:-1]):
            return term
    return next(iter(plain), next((term for term in terms if constant(term) is None), terms[0]))
