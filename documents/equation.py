"""A document's building blocks: equations with the sentence that introduces them, displays of
equations that share a sentence, sections."""

import functools
from dataclasses import dataclass, field, replace

from bptt.documents import drawing
from bptt.documents.graph import Graph
from bptt.documents.latex import latex
from bptt.documents.linebreak import BUDGET, CALLS, FACTORS, INDENT, PLAIN, lines, merged_diagonals, overflows
from bptt.documents.width import width

LONG = 20  # rows of an equation more than a page may not hold beside the sentence before it


@dataclass(frozen=True)
class Equation:
    """`lhs = rhs` and the sentence that says where it comes from. lhs and rhs are LaTeX on one line;
    `lines` is rhs broken to fit the page, empty when it is one line; `expr` the SymPy rhs, when there is one;
    `after`, sentences that read the equation once it is shown (a paragraph after its display)."""

    lhs: str
    rhs: str
    why: str
    lines: tuple = ()
    after: str = ""
    expr: object = field(default=None, compare=False, repr=False)
    fitted_beside: float | None = field(default=None, compare=False, repr=False)  # the lhs width lines fit

    @property
    def rows(self):
        """The display's rows: `lhs = rhs`, or `lhs &= line` then `&\\quad line` rows aligned on the `=`."""
        if len(self.lines) < 2:
            return (f"{self.lhs} = {self.rhs}",)
        return (f"{self.lhs} &= {self.lines[0]}", *(f"&{INDENT} {line}" for line in self.lines[1:]))

    @property
    def aligned_rows(self):
        """The rows in a display of several equations, every first row aligned on its `=`."""
        rows = self.rows
        return (f"{self.lhs} &= {self.rhs}",) if len(rows) == 1 else rows

    def beside(self, lhs_width):
        """The equation broken to fit beside a left-hand side lhs_width points wide (its own or wider)."""
        if self.fitted_beside == lhs_width:
            return self
        return replace(self._broken(lhs_width), fitted_beside=lhs_width)

    def _broken(self, lhs_width):
        """A product is never broken between its factors: where one is too long for a line, the runs of diagonal
        factors of the products are merged (diag(a) diag(b) = diag(a odot b)), and then broken at an odot."""
        if self.expr is None or width(f"{self.lhs} = {self.rhs}") - width(self.lhs) + lhs_width <= BUDGET:
            return replace(self, lines=())
        broken = lines(self.expr, self.lhs, lhs_width)
        if not overflows(broken, lhs_width):
            return replace(self, lines=broken)
        merged = merged_diagonals(self.expr)
        fitted = replace(self, rhs=latex(merged), expr=merged, lines=())
        if width(f"{self.lhs} = {fitted.rhs}") - width(self.lhs) + lhs_width <= BUDGET:
            return fitted
        for reach in (PLAIN, CALLS, FACTORS):
            broken = lines(merged, self.lhs, lhs_width, reach)
            if not overflows(broken, lhs_width):
                break
        return replace(fitted, lines=broken)


def equation(lhs, rhs, why="", after=""):
    """The Equation `lhs = rhs` of a SymPy expression rhs, broken into lines where it does not fit the page."""
    return Equation(lhs, latex(rhs), why, after=after, expr=rhs).beside(width(lhs))


@dataclass(frozen=True)
class Display:
    """Equations shown together after one sentence (the sentence may be empty: the section's text leads in),
    and the sentences that read them, `after` (a paragraph of its own after the display)."""

    why: str
    equations: tuple
    after: str = ""

    @property
    def rows(self):
        if len(self.equations) == 1:
            return self.equations[0].rows
        return tuple(row for eq in self.equations for row in eq.aligned_rows)

    @property
    def breaks(self):
        """After each row but the last: whether the page may break there. In a list of four equations or
        more, between two of them, with at least two before and two after, so that the first stay with the
        sentence and no equation is left alone; inside an equation of more rows than a page holds, between
        its rows after the fourth and before the last three."""
        ends, count = [], len(self.equations)
        for n, eq in enumerate(self.equations):
            rows = len(eq.aligned_rows) if count > 1 else len(eq.rows)
            inside = [rows > LONG and 4 <= row < rows - 3 for row in range(1, rows)]
            ends += inside + [count >= 4 and 1 <= n <= count - 3]
        return tuple(ends[:-1])

    @property
    def aligned(self):
        """Several rows, aligned on the `=`: one equation broken into lines, or several equations."""
        return len(self.rows) > 1


def displays(equations):
    """Consecutive equations with the same sentence (or none, after the first) as one Display each, every
    equation broken to fit beside the widest left-hand side of its display. An equation without a SymPy
    rhs that would not fit beside a wider one starts a display of its own."""
    groups = []
    for eq in equations:
        group = groups[-1] if groups else None
        if group is not None and not group[-1].after and eq.why in (group[0].why, "") and _fits(eq, group):
            group.append(eq)
        else:
            groups.append([eq])
    out = []
    for group in groups:
        widest = max(width(eq.lhs) for eq in group)
        out.append(Display(group[0].why, tuple(eq.beside(widest) for eq in group), group[-1].after))
    return tuple(out)


def _fits(eq, group):
    """eq and the equations of group can share a display: each fits beside the widest left-hand side."""
    widest = max(width(e.lhs) for e in (*group, eq))
    return all(e.expr is not None or width(e.rhs) + widest + width("=") <= BUDGET for e in (*group, eq))


@dataclass(frozen=True)
class Figure:
    """A drawing of a graph (documents/graph.py): TikZ for LaTeX (a float), SVG for Markdown, each drawn when first
    read (a LaTeX document needs no SVG); its caption (LaTeX text with $...$ maths); `file`, the SVG file a Markdown
    document links to instead of inlining the SVG."""

    graph: Graph
    caption: str
    file: str | None = None

    @functools.cached_property
    def tikz(self):
        return drawing.tikz(self.graph)

    @functools.cached_property
    def svg(self):
        return drawing.svg(self.graph)

    @property
    def title(self):
        """The caption's head, up to its first colon: "The unrolled computation"."""
        return self.caption.partition(":")[0]


@dataclass(frozen=True)
class Table:
    """A table of cells (LaTeX text, maths in $...$): its header and rows, shown after the sentence `why`."""

    why: str
    header: tuple
    rows: tuple


@dataclass(frozen=True)
class Section:
    """A part of the document: `name` is what `bptt latex --sections` takes; `items` its displays, figures
    and tables in order, after its text; `uses` the terms of prose.DEFINITIONS it uses."""

    name: str
    title: str
    text: str
    items: tuple
    uses: tuple = ()

    @property
    def equations(self):
        return tuple(eq for item in self.items if isinstance(item, Display) for eq in item.equations)

    @property
    def displays(self):
        return tuple(item for item in self.items if isinstance(item, Display))
