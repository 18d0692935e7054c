"""The brute-force side of the exact proof: the model unrolled with explicit matrices of
symbols (derive.explicit.unroll) and differentiated by SymPy. Nothing here reads derive.bptt.

Two ways to differentiate the unrolled loss L with respect to every entry symbol:
- sympy.diff of L as one expression (`exact_gradients`, `numeric_gradients`): the plainest,
  but the expression grows with every step, and for a gated cell at T=3 it takes minutes;
- the chain rule over the unrolled computation as SymPy records it (`recorded_gradients`):
  every entry of every value the forward pass computes is given a name, so L is a graph of
  small scalar expressions; each is differentiated by sympy.diff, and the partial derivatives
  are accumulated last operation first (reverse mode on the scalar graph, no matrix rule).
  test_exact.py shows that both give the same numbers.

The recorded expressions repeat but for their symbols (each row of W h + U x, each step's gate): each is
differentiated once in a template with its symbols renamed to placeholders in the order they appear (`_partials`),
and the template's derivatives are evaluated with each expression's own values. Renaming symbols bijectively
commutes with differentiation (d f(σa, σb)/d σa is σ of df/da), so this is the same sympy.diff of each expression.
"""

from collections import defaultdict

import mpmath
import sympy as sp

from bptt.derive.explicit import unroll

DIGITS = 60  # working precision of the numeric comparisons


def exact_gradients(problem):
    """{entry symbol: dL/d symbol} at the point, by sympy.diff of L, in exact rationals."""
    loss = unroll(problem.model, problem.steps, dict(problem.symbolic_env))
    return {x: sp.diff(loss, x).xreplace(problem.point) for x in problem.symbols}


def numeric_gradients(problem):
    """{entry symbol: dL/d symbol} at the point, by sympy.diff of L, in DIGITS-digit mpmath."""
    loss = unroll(problem.model, problem.steps, dict(problem.symbolic_env))
    symbols = problem.symbols
    # lambdify(cse=True) would first walk every derivative's whole tree (shared subtrees again and again)
    # looking for implemented functions; handed the common subexpressions, it walks only what they leave.
    shared, reduced = sp.cse([sp.diff(loss, x) for x in symbols])
    gradient = sp.lambdify(symbols, reduced, "mpmath", cse=lambda exprs: (shared, exprs))
    with mpmath.workdps(DIGITS):
        values = gradient(*(mpmath.mpf(problem.point[x].p) / problem.point[x].q for x in symbols))
    return dict(zip(symbols, values, strict=True))


class Recorder(dict):
    """An env for unroll that names each entry of every matrix put into it (a value of the
    forward pass): `definitions` lists (name, scalar expression) in the order computed."""

    def __init__(self, env):
        super().__init__(env)
        self.definitions = []

    def __setitem__(self, key, value):
        if isinstance(value, sp.MatrixBase):
            value = sp.ImmutableMatrix(value.rows, value.cols, [self.name(entry) for entry in value])
        super().__setitem__(key, value)

    def name(self, expr):
        if expr.is_Atom:
            return expr
        symbol = sp.Dummy(f"v{len(self.definitions)}")
        self.definitions.append((symbol, expr))
        return symbol


def recorded_gradients(problem, digits=DIGITS):
    """{entry symbol: dL/d symbol} at the point by the chain rule over the recorded unrolled
    computation: exact rationals if digits is None, else digits-digit SymPy Floats."""
    recorder = Recorder(problem.symbolic_env)
    total, loss = unroll(problem.model, problem.steps, recorder), sp.Dummy("L")
    definitions = [*recorder.definitions, (loss, total)]
    values = {x: v if digits is None else sp.Float(v, digits) for x, v in problem.point.items()}
    for symbol, expr in definitions:
        values[symbol] = expr.xreplace(values)
    adjoint, templates = defaultdict(lambda: sp.S.Zero, {loss: sp.S.One}), {}
    for symbol, expr in reversed(definitions):
        operands, derivatives = _partials(expr, templates)
        at = {_place(k): values[operand] for k, operand in enumerate(operands)}
        for operand, derivative in zip(operands, derivatives, strict=True):
            adjoint[operand] += adjoint[symbol] * derivative.xreplace(at)
    return {x: adjoint[x] for x in problem.symbols}


_PLACES = []  # placeholder symbols, p0, p1, ...: Dummies, so that no expression's own symbol is one


def _place(k):
    while len(_PLACES) <= k:
        _PLACES.append(sp.Dummy(f"p{len(_PLACES)}"))
    return _PLACES[k]


def _partials(expr, templates):
    """(expr's symbols in the order they appear, [d template / d placeholder k] by sympy.diff): the template is expr
    with its k-th symbol renamed to _place(k); templates holds those differentiated before."""
    operands = {}
    for node in sp.preorder_traversal(expr):
        if node.is_Symbol:
            operands.setdefault(node, len(operands))
        else:  # a number, or an operation on symbols and numbers: nothing else can hold a free symbol
            assert node.args or node.is_number, f"{node!r} in {expr}"
    operands = list(operands)
    template = expr.xreplace({operand: _place(k) for k, operand in enumerate(operands)})
    if template not in templates:
        templates[template] = [sp.diff(template, _place(k)) for k in range(len(operands))]
    return operands, templates[template]
