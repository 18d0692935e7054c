"""Textbook LaTeX for derivations: bold vectors and matrices, time subscripts,
`^\\top`, `\\odot`, `\\frac{\\partial L}{\\partial \\mathbf{h}_t}`."""

import functools
import itertools

import sympy as sp
from sympy.printing.latex import LatexPrinter, greek_letters_set

from bptt.derive.blocks import split
from bptt.derive.elementwise import lookup
from bptt.derive.nodes import Adj, SeqAt, equal
from bptt.derive.order import printed_terms
from bptt.derive.text import one_piece
from bptt.documents.latex_names import (
    bold,
    dotted,
    layer,
    mathbf,
    name_parts,
    name_text,
    sequence,
    subscript,
    time_index,
)


def _span(bounds, size):
    """`:` for a whole dimension, else `first:last` counted from 1."""
    start, stop = bounds[0], bounds[1]
    return ":" if start == 0 and equal(stop, size) else f"{time_index(start + 1)}{{:}}{time_index(stop)}"


class BPTTLatexPrinter(LatexPrinter):
    """LaTeX for the nodes of derive.nodes, in textbook notation."""

    def _print(self, expr, **options):
        """A subexpression's LaTeX from latex()'s cache: a document prints each term again and again (in
        its equation, in the pieces the line breaker weighs, in the sums that hold it). Printing is
        context-free (a parent adds the parentheses), so a cached piece is the piece printed afresh."""
        if self._print_level and not options and isinstance(expr, sp.Basic):
            return latex(expr)
        return super()._print(expr, **options)

    def _print_MatrixSymbol(self, expr):
        return bold(expr.name)

    def _print_Symbol(self, expr, style="plain"):
        """A size named with an underscore or a letter outside ASCII: n_h as n_\\textrm{h}, as a parameter's
        subscript prints (sympy would read n_mu as n sub Greek mu); sympy's own printing otherwise."""
        if type(expr) is not sp.Symbol or (expr.name.isascii() and "_" not in expr.name):
            return super()._print_Symbol(expr, style)
        letters, sub = name_parts(expr.name)
        return (rf"\{letters}" if letters in greek_letters_set else name_text(letters)) + subscript(sub)

    def _print_SeqAt(self, expr):
        return sequence(expr.name, time_index(expr.time), name_text if expr.role == "label" else mathbf)

    def _print_MatAt(self, expr):
        base, _, block = expr.name.partition("^")  # A^hc: block (h, c) of A; A^h_f: of h_f, printed A^{hf}
        block = name_text(block.replace("_", ""))  # a superscript's letters, no escaped underscore
        return layer(base) + (rf"^{{{block}}}" if block else "") + f"_{{{time_index(expr.time)}}}"

    def _print_Tangent(self, expr):
        of = expr.of
        if isinstance(of, SeqAt):
            return sequence(of.name, time_index(of.time), dotted)
        return bold(of.name, dotted)

    def _print_Adj(self, expr):
        return rf"\frac{{\partial L}}{{\partial {self._print(expr.of)}}}"

    def _print_MatrixSlice(self, expr):
        """A block of a parameter, its rows and columns counted from 1 as textbooks do: W[h+1:2h, :]."""
        rows, columns = expr.parent.shape
        span = _span(expr.rowslice, rows)
        if columns != 1:
            span += rf",\, {_span(expr.colslice, columns)}"
        return rf"{self._print(expr.parent)}[{span}]"

    def _print_Transpose(self, expr):
        if isinstance(expr.arg, (Adj, sp.HadamardPower)):  # one superscript: (v^{odot -1})^T
            return rf"\left({self._print(expr.arg)}\right)^\top"
        return rf"{self._wrap(expr.arg)}^\top"

    def _print_MatPow(self, expr):
        return rf"\left({self._print(expr.base)}\right)^{{{time_index(expr.exp)}}}"

    def _print_HadamardProduct(self, expr):
        return r" \odot ".join(self._wrap(arg) for arg in expr.args)

    def _print_HadamardPower(self, expr):
        if isinstance(expr.base, sp.Transpose):  # SymPy's (v^T)^{odot e}, printed as the power transposed
            return self._print_Transpose(sp.Transpose(sp.HadamardPower(expr.base.arg, expr.exp)))
        base = self._print(expr.base) if one_piece(expr.base) else rf"\left({self._print(expr.base)}\right)"
        return rf"{base}^{{\odot {self._print(expr.exp)}}}"

    def _print_OneMatrix(self, expr):
        return r"\mathbf{1}"

    def _print_ZeroMatrix(self, expr):
        return r"\mathbf{0}"

    def _print_Identity(self, expr):
        return "1" if expr.shape == (1, 1) else r"\mathbf{I}"  # SymPy's c * OneMatrix(1, 1), a 1 x 1 sum's c

    def _print_Diag(self, expr):
        return rf"\operatorname{{diag}}\left({self._print(expr.vector)}\right)"

    def _print_Apply(self, expr):
        name = lookup(expr.function).latex
        return rf"{name}\left({self._print(expr.arg)}\right)"

    def _print_NormAdjoint(self, expr):
        """A norm's adjoint as a textbook writes it: (1/σ)(I − (1/n)11ᵀ − (1/n)x̂x̂ᵀ) g (derive/norm_adjoint.py)."""
        share, hat = rf"\frac{{1}}{{{self._print(expr.hat.shape[0])}}}", self._print(expr.hat)
        ones = rf" - {share} \mathbf{{1}} \mathbf{{1}}^\top" if expr.centred else ""
        return (
            rf"\frac{{1}}{{{self._print(expr.sigma)}}} \left(\mathbf{{I}}{ones} - {share} {hat} {hat}^\top\right) "
            + self._wrap(expr.g)
        )

    def _print_Reduce(self, expr):
        return rf"{expr.reduction.latex}\left({self._print(expr.arg)}\right)"

    def _print_Softmax(self, expr):
        return rf"\operatorname{{softmax}}\left({self._print(expr.arg)}\right)"

    def _print_OneHot(self, expr):
        return rf"\operatorname{{onehot}}\left({self._print(expr.label)}\right)"

    def _print_GenericLoss(self, expr):
        return rf"l\left({self._print(expr.prediction)}, {self._print(expr.target)}\right)"

    def _print_SquaredError(self, expr):
        diff = f"{self._print(expr.prediction)} - {self._print(expr.target)}"
        return rf"\tfrac{{1}}{{2}}\left\|{diff}\right\|^2"

    def _print_SoftmaxCrossEntropy(self, expr):
        logits, label = self._print(expr.prediction), self._print(expr.target)
        return rf"-\log \operatorname{{softmax}}\left({logits}\right)_{{{label}}}"

    def _print_LossGrad(self, expr):
        return rf"\frac{{\partial {self._print(expr.loss)}}}{{\partial {self._print(expr.loss.prediction)}}}"

    def _print_Xi(self, expr):
        return rf"\xi_{{{time_index(expr.args[0])}}}"

    def _print_Kept(self, expr):
        return (
            rf"\left[{self._print(expr.args[1])} \nmid {time_index(expr.args[0])}\right]"  # Iverson bracket: 1 if true
        )

    def _print_Min(self, expr):
        return r"\min(" + ", ".join(time_index(a) for a in sorted(expr.args, key=str)) + ")"

    def _print_TimeSum(self, expr):
        return rf"{self.sum_sign(expr)} {self._wrap_sum(expr.body)}"

    def sum_sign(self, expr):
        """`\\sum_{t=1}^{T}`: a TimeSum's sign with its bounds."""
        end = self._print(expr.end) if isinstance(expr.end, sp.Min) else time_index(expr.end)
        return rf"\sum_{{{expr.index}={time_index(expr.start)}}}^{{{end}}}"

    def _print_TimeProduct(self, expr):
        """The ordered product written out, its order in plain sight: `A_{t+1} A_{t+2} \\cdots A_{j}`
        (a descending one `G_{t} G_{t-1} \\cdots G_{i+1}`), never a \\prod that hides which factor is on the left."""
        first, second, last = expr.start, expr.start + 1, expr.end
        if expr.descending:
            first, second, last = expr.end, expr.end - 1, expr.start
        factors = [self._wrap_sum(expr.body.subs(expr.index, time)) for time in (first, second, last)]
        return rf"\left({factors[0]} {factors[1]} \cdots {factors[2]}\right)"

    def _print_Placed(self, expr):
        return self._stacked([expr]) if expr.shape[1] == 1 else self._print_Basic(expr)

    def _stacked(self, placed):
        """A vector's adjoint from its row slices' (sorted, disjoint): theirs stacked, zero in the rows none reads."""
        parts, end = [], 0
        for p in placed + [None]:
            start, stop = (placed[0].shape[0], None) if p is None else p.block.rowslice[:2]
            parts += [] if equal(start, end) else [rf"\mathbf{{0}}_{{{self._print(start - end)}}}"]
            parts += [] if p is None else [self._print(p.value)]
            end = stop
        return r"\begin{bmatrix} " + r" \\ ".join(parts) + r" \end{bmatrix}"

    def _print_MatAdd(self, expr):
        if stacked(expr):
            return self._stacked(split(expr)[1])
        terms = printed_terms(expr)
        out = ""
        for n, term in enumerate(terms):
            text = self._print(term)
            if text.startswith("-"):
                out += " - " + text[1:] if n else text
            else:
                out += " + " + text if n else text
        return out

    def _print_MatMul(self, expr):
        coeff, factors = expr.as_coeff_matrices()
        body = " ".join(self._wrap(f) for f in factors)
        if coeff == 1:
            return body
        if coeff == -1:
            return "-" + body
        return f"{self._print(coeff)} {body}"

    def _wrap(self, expr):
        text = self._print(expr)
        return rf"\left({text}\right)" if parenthesized(expr) else text

    def _wrap_sum(self, expr):
        text = self._print(expr)
        return rf"\left({text}\right)" if isinstance(expr, sp.MatAdd) else text


def stacked(expr):
    """Whether a sum prints as one column of its rows' values: blocks of rows of a vector (Placed), disjoint."""
    whole, placed = split(expr)
    return bool(placed) and not whole and expr.shape[1] == 1 and _disjoint(placed)


def _disjoint(placed):
    """Whether blocks sorted by their first row read rows no other reads."""
    ends = [p.block.rowslice[:2] for p in placed]
    return all(sp.simplify(start - stop).is_nonnegative for (_, stop), (start, _) in itertools.pairwise(ends))


def parenthesized(expr):
    """Whether a factor prints in parentheses: a sum, a Hadamard product, a product with a negative coefficient
    (a power's slope, -1/2 v^(-3/2))."""
    if isinstance(expr, (sp.MatAdd, sp.HadamardProduct)):
        return True
    return isinstance(expr, sp.MatMul) and bool(expr.args[0].is_number and expr.args[0].is_negative)


@functools.lru_cache(maxsize=1 << 16)  # every printer sorts the same terms, each a walk of its whole tree
def latex(expr):
    return BPTTLatexPrinter().doprint(expr)
