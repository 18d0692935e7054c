"""derive.atoms.atoms is SymPy's Basic.atoms, remembered: the same nodes for every way Basic.atoms is asked."""

import pytest
import sympy as sp

from bptt.derive.atoms import atoms
from bptt.derive.bptt import derive
from bptt.derive.models import load
from bptt.derive.nodes import Adj, SeqAt

x, y = sp.symbols("x y")
W = sp.MatrixSymbol("W", 3, 3)
v = sp.MatrixSymbol("v", 3, 1)
EXPRESSIONS = [sp.sin(x) + 2 * y + sp.Rational(1, 3), W * v + v, sp.Tuple(x, W.T * v)]
KINDS = [(), (sp.Symbol,), (x,), (sp.Function, sp.Symbol), (sp.Number,), (sp.MatrixSymbol,)]


@pytest.mark.parametrize("kinds", KINDS, ids=str)
@pytest.mark.parametrize("expr", EXPRESSIONS, ids=str)
def test_atoms_are_sympys(expr, kinds):
    assert atoms(expr, *kinds) == frozenset(expr.atoms(*kinds))


def test_atoms_of_a_derivation_are_sympys():
    """The kinds the passes ask (SeqAt, Adj, parameters) of the zoo's LSTM's equations and adjoint contributions."""
    model = load("lstm")
    values = [value for _, value in model.assignments]
    values += [c.value for contributions in derive(model).states.values() for c in contributions]
    assert any(atoms(value, Adj) for value in values)
    for value in values:
        for kind in (SeqAt, Adj, sp.MatrixSymbol):
            assert atoms(value, kind) == frozenset(value.atoms(kind))
