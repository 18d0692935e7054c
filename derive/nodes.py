"""SymPy nodes for recurrent models: time-indexed vectors, adjoints, and the few
operations SymPy's matrix algebra lacks (elementwise functions, diag, losses,
sums and ordered products over time).

Every node keeps the time index as a real SymPy argument, so `subs(t, t + 1)`
shifts time and `subs(t, 3)` picks a step.
"""

import functools

import sympy as sp
from sympy.core.symbol import Str
from sympy.matrices.expressions.matexpr import MatrixExpr

from bptt.derive.atoms import atoms
from bptt.derive.column import Column
from bptt.derive.elementwise import (  # noqa: F401 (the model API)
    Apply,
    elu,
    exp,
    gelu,
    identity,
    leaky_relu,
    log,
    relu,
    sigmoid,
    silu,
    softplus,
    softsign,
    tanh,
)

t = sp.Symbol("t", integer=True)  # the generic time step
T = sp.Symbol("T", integer=True, positive=True)  # the sequence length


def matrix_sum(terms, rows=None):
    """The sum of matrix terms (one term as itself); the zero column of `rows` rows if there are none."""
    terms = list(terms)
    if not terms:
        return sp.ZeroMatrix(rows, 1)
    return sp.MatAdd(*terms).doit(deep=False) if len(terms) > 1 else terms[0]


@functools.lru_cache(maxsize=4096)  # printers ask about the same few sizes again and again
def equal(a, b):
    """Whether two sizes or time indices are the same expression however written (2*n and n + n)."""
    difference = sp.sympify(a - b)
    if difference.is_zero is not None:  # decided by the symbols' assumptions (h - 4 h with h positive)
        return bool(difference.is_zero)
    return sp.simplify(difference) == 0  # milliseconds, and a tenth of a second the first time


@functools.lru_cache(maxsize=4096)  # printers and passes ask about the same few sizes and times again and again
def simplified(expr):
    """sp.simplify(expr), remembered: milliseconds for a sum of sizes (a block's columns after its end)."""
    return sp.simplify(expr)


@functools.lru_cache(maxsize=4096)  # every printed sequence asks (time - t alone is a tenth of a millisecond)
def time_shift(time):
    """How many steps a time index is after t: 1 for t + 1, -1 for t - 1 (an expression if it is not a shift)."""
    return simplified(time - t)


def _str(name):
    return name if isinstance(name, Str) else Str(name)


class SeqAt(Column):
    """A sequence's value at one time step: `h_t`, `x_{t-1}`, a label `y_t`.

    role is "state", "input", "intermediate", "output", "target" or "label".
    """

    def __new__(cls, name, time, rows, role):
        return MatrixExpr.__new__(cls, _str(name), sp.sympify(time), sp.sympify(rows), _str(role))

    name = property(lambda self: self.args[0].name)
    time = property(lambda self: self.args[1])
    rows = property(lambda self: self.args[2])
    role = property(lambda self: self.args[3].name)
    shape = property(lambda self: (self.args[2], sp.S.One))

    def _sympystr(self, printer):
        time = _time_text(printer, self.time)
        return f"{self.name}_{time}" if len(time) == 1 else f"{self.name}_{{{time}}}"


_TIMES = {}  # (a printer's class, a time index): its text, for printers of default settings


def _time_text(printer, time):
    """A time index as the printer prints it, spaces gone (`t-1`); remembered for a printer of its class's default
    settings: printing `t - 1` sorts its terms, a millisecond, and every comment prints the same few times."""
    if printer._settings != printer._default_settings:
        return printer._print(time).replace(" ", "")
    key = type(printer), time
    if key not in _TIMES:
        _TIMES[key] = printer._print(time).replace(" ", "")
    return _TIMES[key]

    def _eval_transpose(self):
        return None


class Adj(MatrixExpr):
    """The adjoint dL/dv of a sequence value v = SeqAt(...): a named gradient."""

    def __new__(cls, of):
        return MatrixExpr.__new__(cls, of)

    of = property(lambda self: self.args[0])
    shape = property(lambda self: self.args[0].shape)


def references(expr):
    """The sequence values an expression reads, sorted for determinism."""
    return sorted(atoms(expr, SeqAt), key=sp.default_sort_key)


def values(expr):
    """The sequence values expr reads: its SeqAt nodes, but not those it reads only as what an adjoint is of."""
    if isinstance(expr, SeqAt):
        return {expr}
    if isinstance(expr, Adj) or not isinstance(expr, sp.Basic):
        return set()
    return set().union(*(values(arg) for arg in expr.args))


class Diag(MatrixExpr):
    """diag(v) for a column vector v; diag(v) g is the Hadamard product v * g."""

    def __new__(cls, vector):
        return MatrixExpr.__new__(cls, vector)

    vector = property(lambda self: self.args[0])

    @functools.cached_property
    def shape(self):
        rows = self.args[0].shape[0]  # asked once: a vector's shape is a walk of its tree, nested diags inside
        return rows, rows

    def _eval_transpose(self):
        return self

    def __mul__(self, other):
        # MatrixExpr's product rebuilds both operands' whole trees (a deep doit): forward mode multiplies
        # its tangent terms by one diag after another, so the cost grew with the square of their size.
        # The other operand is canonical already (built by products like this one); the diag's vector,
        # a slope written as the registry writes it (y * (1 - y)), is made canonical here.
        if isinstance(other, MatrixExpr):
            return _diag_product(self, other)
        return super().__mul__(other)


@functools.lru_cache(maxsize=8192)  # forward mode makes the same products for every parameter's direction
def _diag_product(diag, other):
    return sp.MatMul(Diag(diag.vector.doit()), other).doit(deep=False)


class Softmax(MatrixExpr):
    """softmax(s) of a column vector."""

    def __new__(cls, arg):
        return MatrixExpr.__new__(cls, arg)

    arg = property(lambda self: self.args[0])
    shape = property(lambda self: self.args[0].shape)


class OneHot(MatrixExpr):
    """The one-hot column vector of an integer label, with `classes` rows."""

    def __new__(cls, label, classes):
        return MatrixExpr.__new__(cls, label, sp.sympify(classes))

    label = property(lambda self: self.args[0])
    shape = property(lambda self: (self.args[1], sp.S.One))


class Loss(sp.Expr):
    """A scalar per-step loss l(o_t, y_t). Subclasses say which one."""

    def __new__(cls, prediction, target):
        return sp.Expr.__new__(cls, prediction, target)

    prediction = property(lambda self: self.args[0])
    target = property(lambda self: self.args[1])


class GenericLoss(Loss):
    """An unspecified loss l(o_t, y_t), as in d2l's derivation."""

    derivative_in_words = "left as it is, since the derivation leaves $l$ general"


class SquaredError(Loss):
    """l(o, y) = 1/2 ||o - y||^2."""

    derivative_in_words = "which is the prediction minus the target"


class SoftmaxCrossEntropy(Loss):
    """l(s, y) = -log softmax(s)[y] for an integer label y."""

    derivative_in_words = "which is the softmax of the scores minus the one-hot vector of the label"


class LossGrad(MatrixExpr):
    """dl(o_t, y_t)/do_t of a GenericLoss, kept unevaluated."""

    def __new__(cls, loss):
        return MatrixExpr.__new__(cls, loss)

    loss = property(lambda self: self.args[0])
    shape = property(lambda self: self.args[0].prediction.shape)


class TimeSum(MatrixExpr):
    """sum_{index=start}^{end} body, for a matrix-valued body."""

    def __new__(cls, body, index, start, end):
        return MatrixExpr.__new__(cls, body, index, sp.sympify(start), sp.sympify(end))

    body, index, start, end = (property(lambda self, i=i: self.args[i]) for i in range(4))
    shape = property(lambda self: self.args[0].shape)

    @property
    def free_symbols(self):
        inner = self.body.free_symbols - {self.index}
        return inner | self.start.free_symbols | self.end.free_symbols

    def doit(self, **hints):
        start, end = self.start, self.end
        if not (start.is_Integer and end.is_Integer):
            return self
        terms = [self.body.subs(self.index, k) for k in range(int(start), int(end) + 1)]
        if not terms:
            return sp.ZeroMatrix(*self.shape)
        return sp.MatAdd(*terms).doit(**hints) if hints.get("deep", True) else sp.MatAdd(*terms)


class TimeProduct(MatrixExpr):
    """The ordered product body(start) body(start+1) ... body(end); identity if empty.

    With descending=True the order is body(end) ... body(start): later steps on the left."""

    descending = False

    def __new__(cls, body, index, start, end):
        return MatrixExpr.__new__(cls, body, index, sp.sympify(start), sp.sympify(end))

    body, index, start, end = (property(lambda self, i=i: self.args[i]) for i in range(4))
    shape = property(lambda self: self.args[0].shape)

    @property
    def free_symbols(self):
        inner = self.body.free_symbols - {self.index}
        return inner | self.start.free_symbols | self.end.free_symbols

    def doit(self, **hints):
        if self.index not in self.body.free_symbols:
            return sp.MatPow(self.body, self.end - self.start + 1)
        start, end = self.start, self.end
        if not (start.is_Integer and end.is_Integer):
            return self
        factors = [self.body.subs(self.index, k) for k in range(int(start), int(end) + 1)]
        if not factors:
            return sp.Identity(self.shape[0])
        return sp.MatMul(*(reversed(factors) if self.descending else factors)).doit(**hints)


class DescendingTimeProduct(TimeProduct):
    """body(end) body(end-1) ... body(start): the order of a forward recursion."""

    descending = True


class MatAt(MatrixExpr):
    """A matrix sequence's value at one time step, e.g. the Jacobian c_t (square unless cols is given)."""

    def __new__(cls, name, time, rows, cols=None):
        cols = rows if cols is None else cols
        return MatrixExpr.__new__(cls, _str(name), sp.sympify(time), sp.sympify(rows), sp.sympify(cols))

    name = property(lambda self: self.args[0].name)
    time = property(lambda self: self.args[1])
    shape = property(lambda self: (self.args[2], self.args[3]))


def __getattr__(name):
    """layer_norm and rms_norm, the model API's (derive/norms.py), read when asked for: norms.py reads SeqAt from
    here, so that either module can be imported first."""
    if name in ("layer_norm", "rms_norm"):
        from bptt.derive import norms

        return getattr(norms, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


from bptt.derive.reductions import mean, sum  # noqa: E402, F401, A004 (the model API)
