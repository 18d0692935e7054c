"""Print derived matrix expressions as batched NumPy code.

A column vector v of the maths is an array whose last axis holds v and whose
leading axes are the batch (and, when stacked, time): "row form". So W v
prints as `v @ W.T`, W^T v as `v @ W`, diag(u) v as `u * v`, and one printed
expression serves a single step (`h[t]`) or all steps at once (`h[1:]`).
"""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.elementwise import Apply, lookup
from bptt.derive.latex import term_order
from bptt.derive.nodes import Adj, Diag, OneHot, SeqAt, Softmax, SoftmaxCrossEntropy, SquaredError, t

# Arrays of states and intermediates hold steps 0..T (index = time);
# inputs, outputs and targets hold steps 1..T (index = time - 1).
ALIGNED = ("state", "intermediate")


class PrintError(ValueError):
    """An expression the NumPy printer cannot turn into code."""


def array_name(node):
    """The array holding a sequence value or its adjoint: `h`, `d_h`."""
    if isinstance(node, Adj):
        return f"d_{node.of.name}"
    return node.name


def size_name(symbol):
    return f"n_{symbol}"


class RowPrinter:
    """Prints expressions at one step (`stacked=False`, time variable `t`)
    or for all steps t = 1..T at once (`stacked=True`)."""

    def __init__(self, stacked):
        self.stacked = stacked

    def __call__(self, expr):
        return self.vector(expr)

    def sequence(self, node):
        seq = node.of if isinstance(node, Adj) else node
        name = array_name(node)
        offset = sp.S.Zero if seq.role in ALIGNED else sp.S.One
        if not self.stacked:
            return f"{name}[{_index(seq.time - offset)}]"
        shift = sp.simplify(seq.time - t)
        if shift == 0:
            return f"{name}[1:]" if seq.role in ALIGNED else name
        if shift == -1 and seq.role in ALIGNED:
            return f"{name}[:-1]"
        raise PrintError(f"cannot stack {name} at time {seq.time} over t = 1..T")

    def vector(self, expr):
        """Row form of a column-vector expression."""
        if isinstance(expr, (SeqAt, Adj)):
            return self.sequence(expr)
        if isinstance(expr, sp.MatrixSymbol):
            return expr.name
        if isinstance(expr, OneMatrix):
            return "1"
        if isinstance(expr, sp.MatAdd):
            return self.matadd(expr)
        if isinstance(expr, sp.MatMul):
            return self.matmul(expr)
        if isinstance(expr, sp.HadamardProduct):
            return " * ".join(self.operand(arg) for arg in expr.args)
        if isinstance(expr, sp.HadamardPower):
            return f"{self.operand(expr.base)} ** {expr.exp}"
        if isinstance(expr, Apply):
            code = lookup(expr.function).code["numpy"]
            return code.format(arg=self.vector(expr.arg), operand=self.operand(expr.arg))
        if isinstance(expr, Softmax):
            return f"_softmax({self.vector(expr.arg)})"
        if isinstance(expr, OneHot):
            return f"_onehot({self.label(expr.label)}, {size_name(expr.shape[0])}, dtype)"
        raise PrintError(f"no NumPy form for {type(expr).__name__}: {expr}")

    def label(self, node):
        return self.sequence(node)

    def operand(self, expr):
        """Row form, parenthesised where * or ** would bind wrongly."""
        return _paren(self.vector(expr))

    def lookup(self, matrix, onehot):
        label = self.label(onehot.label)
        if isinstance(matrix, sp.Transpose) and isinstance(matrix.arg, sp.MatrixSymbol):
            return f"{matrix.arg.name}[{label}]"
        if isinstance(matrix, sp.MatrixSymbol):
            return f"{matrix.name}.T[{label}]"
        raise PrintError(f"a one-hot vector must be multiplied by a parameter, not {matrix}")

    def matadd(self, expr):
        out = ""
        for term in sorted(expr.args, key=term_order):
            negative = isinstance(term, sp.MatMul) and bool(term.args[0].is_negative)
            text = self.vector(-term if negative else term)
            if negative:
                out += f" - {_paren(text) if ' + ' in text or ' - ' in text else text}" if out else f"-{_paren(text)}"
            else:
                out += f" + {text}" if out else text
        return out

    def matmul(self, expr):
        coeff, factors = expr.as_coeff_matrices()
        if isinstance(factors[-1], OneHot):  # P onehot(x) is a lookup of column x of P
            acc, factors = self.lookup(factors[-2], factors[-1]), factors[:-1]
        else:
            acc = self.vector(factors[-1])
        for factor in reversed(factors[:-1]):
            acc = self.apply(factor, acc, expr)
        return acc if coeff == 1 else f"{scalar(coeff)} * {_paren(acc)}"

    def apply(self, factor, acc, expr):
        """factor times the vector whose row form is acc."""
        if isinstance(factor, Diag):
            return f"{self.operand(factor.vector)} * {_paren(acc)}"
        if isinstance(factor, sp.Transpose) and isinstance(factor.arg, sp.MatrixSymbol):
            return f"{acc} @ {factor.arg.name}"
        if isinstance(factor, sp.MatrixSymbol):
            return f"{acc} @ {factor.name}.T"
        raise PrintError(f"no NumPy form for the factor {factor} in {expr}")


def scalar(expr):
    """A scalar coefficient: -1, 1/T."""
    if expr == -1:
        return "-1"
    return str(expr) if expr.is_Integer else "(" + str(expr).replace("/", " / ") + ")"


def _paren(text):
    """Parenthesise unless text is one name, call or subscript."""
    depth, top_level = 0, []
    for char in text:
        depth += char in "(["
        depth -= char in ")]"
        if depth == 0:
            top_level.append(char)
    return f"({text})" if " " in "".join(top_level) else text


def _index(expr):
    return str(sp.expand(expr))


def param_gradient(term, printer):
    """Stacked code for one term of sum_t (...) of a parameter gradient."""
    rows = term.shape[0]
    if term.shape[1] == 1:
        return f"{_paren(printer(term))}.reshape(-1, {size_name(rows)}).sum(axis=0)"
    coeff, factors = term.as_coeff_matrices()
    last = factors[-1]
    if not isinstance(last, sp.Transpose) or last.arg.shape[1] != 1:
        raise PrintError(f"a matrix gradient term must end in a transposed vector: {term}")
    left = sp.MatMul(coeff, *factors[:-1]).doit(deep=False)
    left_code = printer(left)
    if isinstance(last.arg, OneHot):  # sum_t g_t onehot(x_t)^T adds g_t into column x_t
        return f"_scatter_columns({left_code}, {printer.label(last.arg.label)}, {size_name(last.arg.shape[0])})"
    right_code = printer(last.arg)
    cols = last.arg.shape[0]
    return f"{_paren(left_code)}.reshape(-1, {size_name(rows)}).T @ {_paren(right_code)}.reshape(-1, {size_name(cols)})"


def per_step_loss(loss, printer):
    """Code for the per-step, per-sample loss values, shape (T, B)."""
    prediction, target = printer(loss.prediction), printer(loss.target)
    if isinstance(loss, SquaredError):
        return f"0.5 * (({prediction} - {target}) ** 2).sum(axis=-1)"
    if isinstance(loss, SoftmaxCrossEntropy):
        return f"_logsumexp({prediction}) - np.take_along_axis({prediction}, {target}[..., None], axis=-1)[..., 0]"
    raise PrintError(f"no NumPy form for the loss {type(loss).__name__}; give the model a concrete code_loss")
