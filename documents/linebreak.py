"""Long equations broken into lines that fit the page, at places chosen from the expression.

The printer's one-line LaTeX of an expression is cut into pieces at the places a line may break:
before each term of a sum (and of a sum in parentheses, closed with `\\right.` at the line's end and
reopened with `\\left.` on the next) and before each `\\odot`, so that every continuation line starts
with its operator. A product of factors is never broken: its factors stay on one line. Pieces are
packed greedily into lines under the page width (widths estimated by documents.width); when a piece
overflows, the line breaks at its best place, an outer place before an inner one, the latest such
place on the line. The pieces joined are the one-line LaTeX.
"""

from dataclasses import dataclass, replace

import sympy as sp

from bptt.derive.elementwise import Apply, lookup
from bptt.derive.nodes import Diag, Softmax, TimeSum
from bptt.derive.order import printed_terms
from bptt.documents.latex import BPTTLatexPrinter, latex, parenthesized, stacked
from bptt.documents.width import width

PAGE = 483.7  # the text width of a4 paper with 2 cm margins, in points
BUDGET = 0.9 * PAGE  # what an equation may take, in estimated points: the estimate is within 10% of the real width
INDENT = r"\quad"  # before a continuation line

TERM, FACTOR = 0, 1  # kinds of break, best first: before a term's sign or an \\odot; between two factors
PLAIN, CALLS, FACTORS = 0, 1, 2  # how far the cutter reaches: sums and odots; inside diag(...), tanh(...); factors


@dataclass(frozen=True)
class Piece:
    """Printed LaTeX with what may come before it: its glue on one line, or a break of a kind
    (None: never) at `depth` open parentheses."""

    text: str
    glue: str = ""
    kind: int | None = None
    depth: int = 0


class _Cutter:
    """The pieces of an expression, following BPTTLatexPrinter's layout."""

    def __init__(self, reach=PLAIN):
        self.printer = BPTTLatexPrinter()
        self.reach = reach  # CALLS: break inside diag(...), tanh(...) too; FACTORS: between factors, the last resort

    def pieces(self, expr, depth):
        if isinstance(expr, sp.MatAdd) and stacked(expr):  # one column of rows (latex.py), not a sum to break
            return [Piece(latex(expr), depth=depth)]
        if isinstance(expr, sp.MatAdd):
            return self.sum_pieces(expr, depth)
        if isinstance(expr, sp.MatMul):
            return self.product_pieces(expr, depth)
        if isinstance(expr, sp.HadamardProduct):
            parts = [self.wrapped(arg, depth) for arg in expr.args]
            return _joined(parts, r"\odot ", TERM)
        if self.reach >= CALLS and isinstance(expr, (Diag, Apply, Softmax)):
            return self.called(expr, depth)
        if self.reach >= CALLS and isinstance(expr, sp.HadamardPower) and not isinstance(expr.base, sp.Transpose):
            inside = self.wrapped(expr.base, depth)
            power = rf"^{{\odot {self.printer.doprint(expr.exp)}}}"
            return inside[:-1] + [replace(inside[-1], text=inside[-1].text + power)]
        if isinstance(expr, TimeSum):
            return _prefixed(self.printer.sum_sign(expr), self.summed(expr.body, depth))
        return [Piece(latex(expr), depth=depth)]

    def called(self, expr, depth):
        """diag(v), tanh(a), softmax(s): the function's name, then its argument's pieces in parentheses."""
        if isinstance(expr, Diag):
            head, arg = r"\operatorname{diag}", expr.vector
        elif isinstance(expr, Softmax):
            head, arg = r"\operatorname{softmax}", expr.arg
        else:
            head, arg = lookup(expr.function).latex, expr.arg
        return _prefixed(head, _enclosed(self.pieces(arg, depth + 1), depth), glue="")

    def sum_pieces(self, expr, depth):
        out = []
        for n, term in enumerate(printed_terms(expr)):
            first, *rest = self.pieces(term, depth)
            if n:
                negative = first.text.startswith("-")
                sign = "- " + first.text[1:] if negative else "+ " + first.text
                first = replace(first, text=sign, glue=" ", kind=TERM)
            out += [first, *rest]
        return out

    def product_pieces(self, expr, depth):
        coeff, factors = expr.as_coeff_matrices()
        parts = [self.wrapped(factor, depth) for factor in factors]
        out = _joined(parts, "", FACTOR if self.reach >= FACTORS else None)
        if coeff == -1:
            return _prefixed("-", out, glue="")
        if coeff != 1:
            return _prefixed(self.printer.doprint(coeff), out)
        return out

    def wrapped(self, expr, depth):
        """The pieces of a factor, in parentheses where the printer puts them."""
        if parenthesized(expr):
            return _enclosed(self.pieces(expr, depth + 1), depth)
        return self.pieces(expr, depth)

    def summed(self, body, depth):
        """The pieces of the body of a sum or product over time, in parentheses if it is a sum."""
        if isinstance(body, sp.MatAdd):
            return _enclosed(self.pieces(body, depth + 1), depth)
        return self.pieces(body, depth)


def _joined(parts, operator, kind):
    """Lists of pieces, one after the other, each after the first starting with operator; a break of
    `kind` before each (None: the parts are glued, each to the last piece of the one before)."""
    out = list(parts[0])
    for part in parts[1:]:
        first, *rest = part
        if kind is None:
            last = out.pop()
            first = replace(last, text=last.text + " " + operator + first.text)
            out += [first, *rest]
        else:
            out += [replace(first, text=operator + first.text, glue=" ", kind=kind), *rest]
    return out


def _prefixed(head, pieces, glue=" "):
    """Pieces with head (a sign, `\\sum_{t=1}^{T}`) before the first."""
    first, *rest = pieces
    return [replace(first, text=head + glue + first.text), *rest]


def _enclosed(pieces, depth):
    """Pieces in \\left( \\right): the first keeps its outer depth, the others are inside."""
    first, *rest = pieces
    out = [replace(first, text=r"\left(" + first.text, depth=depth), *rest]
    return out[:-1] + [replace(out[-1], text=out[-1].text + r"\right)")]


def pieces(expr, reach=PLAIN):
    """The pieces of an expression's LaTeX; joined with their glue they are latex(expr)."""
    return _Cutter(reach).pieces(expr, 0)


def pack(items, first, rest):
    """Lines of pieces: the first line at most `first` points wide, the others `rest`."""
    lines, line, wide = [], [], 0  # wide: _width(line), added to piece by piece as sum() adds
    for piece in items:
        line.append(piece)
        wide += width(piece.text)
        while wide > (rest if lines else first) and (breaks := _breaks(line)):
            cut = min(breaks, key=lambda n: (line[n].kind, line[n].depth, -n))
            lines.append(line[:cut])
            line = line[cut:]
            wide = _width(line)
    return lines + [line]


def _breaks(line):
    return [n for n in range(1, len(line)) if line[n].kind is not None]


def _width(line):
    return sum(width(piece.text) for piece in line)


def merged_diagonals(expr):
    """expr with every run of diagonal factors of a product written as one, diag(a) diag(b) = diag(a * b):
    shorter, and breakable at its odot, for a product too long for a line (it is never broken between factors)."""

    def merge(product):
        coeff, factors = product.as_coeff_matrices()
        out = []
        for factor in factors:
            if isinstance(factor, Diag) and out and isinstance(out[-1], Diag):
                vectors = [v for d in (out.pop(), factor) for v in _hadamard_args(d.vector)]
                factor = Diag(sp.HadamardProduct(*vectors))
            out.append(factor)
        return sp.MatMul(coeff, *out).doit(deep=False) if len(out) < len(factors) else product

    return expr.replace(lambda e: isinstance(e, sp.MatMul), merge)


def _hadamard_args(vector):
    return vector.args if isinstance(vector, sp.HadamardProduct) else (vector,)


def overflows(rows, beside):
    """Whether a row of broken lines is wider than the budget beside a left-hand side `beside` points wide."""
    return any(width(row) > BUDGET - beside - width(INDENT) for row in rows)


def lines(expr, lhs, beside=None, reach=PLAIN):
    """The right-hand side of `lhs = expr` as LaTeX lines that fit the page beside lhs (or beside a
    left-hand side `beside` points wide, the widest of a display's equations). reach: CALLS to break
    inside the parentheses of diag(...), tanh(...) and softmax(...) too, where a product does not fit a line;
    FACTORS, the last resort, between two factors too, the line after starting with an explicit \\cdot."""
    beside = width(lhs) if beside is None else beside
    packed = pack(pieces(expr, reach), BUDGET - beside - width("="), BUDGET - beside - width(INDENT))
    out = []
    for n, line in enumerate(packed):
        opened = line[0].depth if n else 0
        closed = packed[n + 1][0].depth if n + 1 < len(packed) else 0
        start = r"\left. " * opened + {TERM: "{}", FACTOR: r"\cdot "}.get(line[0].kind, "") * bool(n)
        body = "".join(piece.glue + piece.text for piece in line[1:])
        out.append(start + line[0].text + body + r" \right." * closed)
    return tuple(out)
