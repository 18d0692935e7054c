"""The exercises' second check: sympy.diff of the unrolled loss, written apart from the exercise generator.

It shares no code with bptt.documents.exercises' evaluation (nor with bptt.derive.explicit or bptt.derive.bptt):
it reads the instance's numbers and the model's step equations, evaluates every node on explicit SymPy matrices
with rules of its own, and differentiates the unrolled loss with sympy.diff. An activation given as data
(y = 3/4 for tanh) is the activation shifted to take that value at the instance's point: f(a + delta) with
delta = f^{-1}(y) - a, so the loss is a true function of the parameters whose derivative there uses f'(f^{-1}(y)).
"""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.elementwise import FUNCTIONS, Apply
from bptt.derive.nodes import OneHot, SeqAt, Softmax, SoftmaxCrossEntropy, SquaredError, t

INVERSES = {"tanh": sp.atanh, "sigmoid": lambda y: sp.log(y / (1 - y)), "exp": sp.log}


class Unrolled:
    """The model unrolled on an instance, with some entries symbolic: `symbols` {key: Matrix of Dummies} for
    parameters (by MatrixSymbol), initial states (SeqAt at 0) and nudges added to a value after it is computed
    (SeqAt at k); `point` the instance's values of those symbols (0 for a nudge)."""

    def __init__(self, found, keys, chunk=None):
        self.found, self.model = found, found.model
        self.sizes = {s: n for s, n in found.sizes.items()}
        self.symbols, self.point = {}, {}
        for key in keys:
            rows, cols = (int(sp.sympify(n).xreplace(self.sizes)) for n in key.shape)
            self.symbols[key] = sp.Matrix(rows, cols, lambda r, c, key=key: sp.Dummy(f"{key}_{r}{c}"))
            at = found.data.get(key) if not (isinstance(key, SeqAt) and key.time != 0) else sp.zeros(rows, cols)
            self.point.update(zip(self.symbols[key], at, strict=True))
        self.values, self.definitions = {}, []
        self.loss = self._name(self._unroll(chunk))
        self.adjoints = self._reverse()

    def gradient(self, key):
        """dL/d key at the instance's point, exact."""
        rows, cols = self.symbols[key].shape
        return sp.Matrix(rows, cols, [self.adjoints.get(s, sp.S.Zero) for s in self.symbols[key]])

    def _name(self, expr):
        """expr as a Dummy defined by it (its value at the point kept): the unrolled loss as a graph of small
        expressions, each differentiated by sympy.diff below."""
        if expr.is_Atom:
            return expr
        symbol = sp.Dummy("v")
        self.definitions.append((symbol, expr))
        self.point[symbol] = expr.xreplace(self.point)  # a loss may be irrational: log(4/3)
        return symbol

    def _reverse(self):
        """The chain rule over the definitions, last first: dL/d every symbol at the point."""
        adjoints = {self.loss: sp.S.One}
        for symbol, expr in reversed(self.definitions):
            if symbol not in adjoints:
                continue
            for operand in expr.free_symbols:
                share = _exact(sp.diff(expr, operand).xreplace(self.point))
                adjoints[operand] = adjoints.get(operand, sp.S.Zero) + adjoints[symbol] * share
        return adjoints

    def _unroll(self, chunk):
        model, found = self.model, self.found
        for state in model.states:
            self.values[state(0)] = self._nudged(state(0), sp.Matrix(found.data[state(0)]))
        forced, losses = model.forced, []
        for k in range(1, found.steps + 1):
            for seq, rhs in model.assignments:
                value = self.node(forced.get(seq, rhs).subs(t, k))
                self.values[seq(k)] = self._nudged(seq(k), value).applyfunc(self._name)
            losses.append(self._name(self.node(model.concrete_loss().subs(t, k))))
            if chunk and k % chunk == 0:  # the states entering step k + 1 are constants: no flow back
                for state in model.states:
                    self.values[state(k)] = self.values[state(k)].xreplace(self.point)
        total = sum(losses)
        return total / found.steps if model.mean else total

    def _nudged(self, key, value):
        return value + self.symbols[key] if key in self.symbols and key.time != 0 else self.symbols.get(key, value)

    def node(self, node):
        if isinstance(node, sp.MatrixSymbol):
            return self.symbols.get(node, sp.Matrix(self.found.data[node]))
        if isinstance(node, SeqAt):
            return self._sequence(node)
        rule = getattr(self, f"_{type(node).__name__}", None)
        if rule is None:
            raise NotImplementedError(f"the exercise oracle has no rule for {type(node).__name__}")
        return rule(node)

    def _sequence(self, node):
        if node in self.values:
            return self.values[node]
        value = self.found.data[node]
        return value if isinstance(value, int) else sp.Matrix(value)

    def _MatAdd(self, node):
        parts = [self.node(arg) for arg in node.args]
        return sum(parts[1:], parts[0])

    def _MatMul(self, node):
        out = None
        for arg in node.args:
            value = self.node(arg) if isinstance(arg, sp.MatrixExpr) else arg
            out = value if out is None else out * value
        return out

    def _Transpose(self, node):
        return self.node(node.arg).T

    def _HadamardProduct(self, node):
        parts = [self.node(arg) for arg in node.args]
        out = parts[0]
        for part in parts[1:]:
            out = out.multiply_elementwise(part)
        return out

    def _HadamardPower(self, node):
        return self.node(node.base).applyfunc(lambda e: e**node.exp)

    def _OneMatrix(self, node):
        return sp.ones(*(int(sp.sympify(n).xreplace(self.sizes)) for n in node.shape))

    def _MatrixSlice(self, node):
        rows, cols = node.rowslice, node.colslice
        size = lambda n: int(sp.sympify(n).xreplace(self.sizes))  # noqa: E731
        return self.node(node.parent)[size(rows[0]) : size(rows[1]), size(cols[0]) : size(cols[1])]

    def _OneHot(self, node):
        label, rows = self.node(node.label), int(sp.sympify(node.shape[0]).xreplace(self.sizes))
        return sp.Matrix(rows, 1, lambda r, c: 1 if r == label else 0)

    def _Apply(self, node):
        argument = self.node(node.arg)
        scalar = FUNCTIONS[node.function].scalar
        if node not in self.found.given:
            return argument.applyfunc(scalar)
        shift = [
            INVERSES[node.function](y) - a.xreplace(self.point)
            for y, a in zip(self.found.given[node], argument, strict=True)
        ]
        return sp.Matrix(argument.rows, 1, [scalar(a + d) for a, d in zip(argument, shift, strict=True)])

    def _Softmax(self, node):
        scores = self._shifted_scores(node)
        exps = scores.applyfunc(sp.exp)
        return exps / sum(exps)

    def _shifted_scores(self, softmax):
        """The scores a softmax reads, shifted so that their softmax is the given probabilities at the point."""
        scores = self.node(softmax.arg)
        if softmax not in self.found.given:
            return scores
        return scores + sp.Matrix(
            [sp.log(p) - s.xreplace(self.point) for p, s in zip(self.found.given[softmax], scores, strict=True)]
        )

    def _SquaredError(self, node):
        difference = self.node(node.prediction) - self.node(node.target)
        return sum(e**2 for e in difference) / 2

    def _SoftmaxCrossEntropy(self, node):
        scores = self._shifted_scores(Softmax(node.prediction))
        return -scores[self.node(node.target)] + sp.log(sum(sp.exp(e) for e in scores))


def _exact(value):
    value = value if value.is_Rational else sp.nsimplify(sp.simplify(value))
    assert value.is_Rational, f"not exact: {value}"
    return value


def gradient(found, key, chunk=None):
    """dL/d key (a parameter, an initial state, or a value at step k) by sympy.diff of the unrolled loss."""
    return Unrolled(found, [key], chunk).gradient(key)


__all__ = ["gradient", "Unrolled", "OneHot", "SquaredError", "SoftmaxCrossEntropy", "Apply", "OneMatrix"]
