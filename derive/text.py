"""Plain-text maths in the user's notation: comments in generated code (`dL/dh_t = W_hh^T dL/dh_{t+1} + ...`)
and the expressions a refusal names (`W^T`, `tanh(a_t)`, `(W h_{t-1})^(-1/2)`), never a node's class."""

import functools

import sympy as sp
from sympy.printing.str import StrPrinter

from bptt.derive.order import term_order

# The values that print as one symbol or one call (W, h_t, tanh(a_t), mean(v), W[h:2h]), by class: an elementwise
# power written after one is its own. Any other base (a product U x_t, a sum, a Hadamard product or power) every
# printer puts in parentheses first, so that (U x_t)^3 never reads as U x_t^3.
ONE_PIECE = frozenset(
    ("MatrixSymbol", "SeqAt", "Tangent", "Apply", "Reduce", "Softmax", "OneHot", "MatrixSlice", "OneMatrix")
)


def one_piece(expr):
    return type(expr).__name__ in ONE_PIECE


class TextPrinter(StrPrinter):
    def _print_Adj(self, expr):
        return f"dL/d{self._print(expr.of)}"

    def _print_Tangent(self, expr):
        return f"dot({self._print(expr.of)})"

    def _print_MatrixSymbol(self, expr):
        return expr.name

    def _print_Placed(self, expr):
        return f"[{self._print(expr.block)}: {self._print(expr.value)}]"

    def _print_Transpose(self, expr):
        return f"{self._wrap(expr.arg)}^T"

    def _print_MatMul(self, expr):
        coeff, factors = expr.as_coeff_matrices()
        body = " ".join(self._wrap(f) for f in factors)
        if coeff == 1:
            return body
        return ("-" if coeff == -1 else f"{self._print(coeff)} ") + body

    def _print_MatAdd(self, expr):
        out = ""
        for term in sorted(expr.args, key=term_order):
            text = self._print(term)
            if out:
                out += f" - {text[1:]}" if text.startswith("-") else f" + {text}"
            else:
                out = text
        return out

    def _print_HadamardProduct(self, expr):
        return " * ".join(self._wrap(a) for a in expr.args)

    def _print_HadamardPower(self, expr):
        exp, base = expr.exp, self._print(expr.base)
        return f"{base if one_piece(expr.base) else f'({base})'}^{exp if exp.is_Integer and exp > 0 else f'({exp})'}"

    def _print_MatPow(self, expr):
        return f"{self._wrap(expr.base)}^{expr.exp}"

    def _print_OneMatrix(self, expr):
        return "1"

    def _print_Identity(self, expr):
        return "1" if expr.shape == (1, 1) else "I"

    def _print_Diag(self, expr):
        return f"diag({self._print(expr.vector)})"

    def _print_Apply(self, expr):
        return f"{expr.function}({self._print(expr.arg)})"

    def _print_Softmax(self, expr):
        return f"softmax({self._print(expr.arg)})"

    def _print_Reduce(self, expr):
        return f"{expr.name}({self._print(expr.arg)})"

    def _print_NormAdjoint(self, expr):
        rows, hat = expr.hat.shape[0], self._print(expr.hat)
        n = self._print(rows) if rows.is_Atom else f"({self._print(rows)})"
        ones = f" - 1/{n} 1 1^T" if expr.centred else ""
        return f"1/{self._print(expr.sigma)} (I{ones} - 1/{n} {hat} {hat}^T) {self._wrap(expr.g)}"

    def _print_Norm(self, expr):
        listed = [self._print(a) for a in (expr.arg, expr.gain, expr.bias) if a is not None]
        return f"{expr.kind}({', '.join(listed)}, eps={expr.eps})"

    def _print_OneHot(self, expr):
        return f"onehot({self._print(expr.label)})"

    def _print_GenericLoss(self, expr):
        return f"l({self._print(expr.prediction)}, {self._print(expr.target)})"

    def _print_SquaredError(self, expr):
        return f"1/2 ||{self._print(expr.prediction)} - {self._print(expr.target)}||^2"

    def _print_SoftmaxCrossEntropy(self, expr):
        return f"-log softmax({self._print(expr.prediction)})[{self._print(expr.target)}]"

    def _print_LossGrad(self, expr):
        return f"dl/d{self._print(expr.loss.prediction)}"

    def _print_TimeSum(self, expr):
        return f"sum_{expr.index} {self._wrap(expr.body)}"

    def _wrap(self, expr):
        text = self._print(expr)
        return f"({text})" if isinstance(expr, (sp.MatAdd, sp.HadamardProduct)) else text


@functools.lru_cache(maxsize=8192)  # comments print the same expressions (and their terms) again and again
def text(expr):
    return TextPrinter().doprint(expr)


def equation(lhs, rhs):
    return f"{text(lhs)} = {text(rhs)}"


class UserPrinter(TextPrinter):
    """The maths as the user wrote it: a parameter's own name where the code has its tangent (W^T,
    not dot(W)^T), a matrix of ones with its shape (a column of ones is the 1 of `1 - z_t`)."""

    def _print_Tangent(self, expr):
        return self._print(expr.of)

    def _print_OneMatrix(self, expr):
        rows, cols = expr.shape
        return "1" if cols == 1 else f"ones({rows} x {cols})"


# What a refusal calls a node, by its class: {text} is the node in the user's notation. A class not
# listed (a user's own node) is named by its notation alone.
KINDS = {
    "HadamardPower": "an elementwise power {text}",
    "MatPow": "a matrix power {text}",
    "Inverse": "a matrix inverse {text}",
    "Transpose": "the transpose {text}",
    "MatAdd": "the sum {text}",
    "MatMul": "the product {text}",
    "HadamardProduct": "the elementwise product {text}",
    "OneMatrix": "a matrix of ones ({rows} x {cols})",
    "Identity": "an identity matrix ({rows} x {cols})",
    "MatrixSlice": "the block {text}",
    "Apply": "the elementwise function {text}",
    "Reduce": "the reduction {text}",
    "Norm": "the norm {text}",
    "Diag": "the diagonal matrix {text}",
    "MatrixSymbol": "the parameter {text}",
}


def notation(expr):
    """expr in the user's notation."""
    return UserPrinter().doprint(expr)


def described(node):
    """What a refusal calls node: its kind in words and its notation, `an elementwise power (W h_{t-1})^(-1/2)`."""
    kind = KINDS.get(type(node).__name__, "{text}")
    rows, cols = getattr(node, "shape", (None, None))
    return kind.format(text=notation(node), rows=rows, cols=cols)
