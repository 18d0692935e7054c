"""A model the tool cannot derive or print, said in the user's notation: which model, which backend,
which of the model's equations, and what in it has no rule or no code yet."""

import contextlib

import sympy as sp

from bptt.derive.atoms import atoms
from bptt.derive.text import notation


class Refusal(ValueError):
    """`what`: the reason, in the user's notation; `node`: the expression refused, by which the model's
    equation holding it is found. The layers that know them fill in the model, the backend, the equation."""

    def __init__(self, what, node=None):
        super().__init__(what)
        self.what, self.node = what, node
        self.model = self.backend = self.equation = None

    def __str__(self):
        where = f"model {self.model!r}" if self.model else ""
        if self.backend:
            where += f" ({self.backend} backend)" if where else f"the {self.backend} backend"
        if self.equation:
            where += f", in {self.equation}" if where else f"in {self.equation}"
        return f"{where}: {self.what}" if where else self.what


@contextlib.contextmanager
def refusing(model, backend=None):
    """Refusals raised inside name `model`, `backend` (its name in words), and the equation holding their node."""
    try:
        yield
    except Refusal as error:
        error.model = error.model or model.name
        error.backend = error.backend or backend
        if error.equation is None and error.node is not None:
            error.equation = equation_of(model, error.node)
        raise


def equation_of(model, node):
    """The first of the model's equations (then its loss) that holds node, read as the user wrote it (a
    parameter for its tangent), at any step; else the first that reads every name node reads; else None."""
    from bptt.derive.nodes import t  # nodes and tangent's rules raise refusals: imported when one is placed
    from bptt.derive.tangent import Tangent

    node = node.replace(lambda e: isinstance(e, Tangent), lambda e: e.of)
    shifted = {node, node.subs(t, t - 1), node.subs(t, t + 1)}
    equations = [(f"{seq.name}_t =", rhs) for seq, rhs in model.assignments] + [("the loss", model.loss)]
    holding = [(lhs, rhs) for lhs, rhs in equations if any(rhs.has(n) for n in shifted)]
    names = _names(node)
    reading = [(lhs, rhs) for lhs, rhs in equations if names and names <= _names(rhs)]
    found = next(iter(holding + reading), None)
    return None if found is None else f"{found[0]} {notation(found[1])}"


def _names(expr):
    """The names of the parameters and sequences expr reads."""
    from bptt.derive.nodes import SeqAt

    return {a.name for a in atoms(expr, sp.MatrixSymbol, SeqAt)}
