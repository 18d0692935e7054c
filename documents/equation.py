"""A document's building blocks: equations with the sentence that justifies them."""

from dataclasses import dataclass

from bptt.documents.latex import latex
from bptt.documents.linebreak import BUDGET, INDENT, lines
from bptt.documents.width import width


@dataclass(frozen=True)
class Equation:
    """`lhs = rhs` and the sentence that says where it comes from. lhs and rhs are LaTeX on one line;
    `lines` is rhs broken to fit the page, empty when it is one line."""

    lhs: str
    rhs: str
    why: str
    lines: tuple = ()

    @property
    def rows(self):
        """The display's rows: `lhs = rhs`, or `lhs &= line` then `&\\quad line` rows aligned on the `=`."""
        if len(self.lines) < 2:
            return (f"{self.lhs} = {self.rhs}",)
        return (f"{self.lhs} &= {self.lines[0]}", *(f"&{INDENT} {line}" for line in self.lines[1:]))


def equation(lhs, rhs, why=""):
    """The Equation `lhs = rhs` of a SymPy expression rhs, broken into lines where it does not fit the page."""
    text = latex(rhs)
    if width(f"{lhs} = {text}") <= BUDGET:
        return Equation(lhs, text, why)
    return Equation(lhs, text, why, lines(rhs, lhs))


@dataclass(frozen=True)
class Section:
    title: str
    text: str
    equations: tuple
