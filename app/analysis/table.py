"""The numbers behind one plot, as text, CSV and HTML (which is how a notebook displays a Table)."""

import html
from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """Named columns and rows of numbers (or names); `labels` are the columns in matplotlib's mathtext, for plots."""

    name: str  # the file stem of its plot and CSV, e.g. "gradient_norms"
    title: str
    columns: tuple
    rows: tuple
    labels: tuple = ()  # one per column; the column names when not given
    regime: str = ""  # what the runs behind it were, in words: "nearly linear, input scale 1e-10, ..."

    def __post_init__(self):
        object.__setattr__(self, "rows", tuple(tuple(row) for row in self.rows))
        object.__setattr__(self, "labels", tuple(self.labels) or tuple(self.columns))
        if len(self.labels) != len(self.columns):
            raise ValueError(f"table {self.name}: {len(self.labels)} labels for {len(self.columns)} columns")

    def column(self, name):
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def label(self, name):
        """The mathtext label of a column."""
        return self.labels[self.columns.index(name)]

    def cells(self, exact=False):
        return [[_cell(value, exact) for value in row] for row in self.rows]

    def text(self):
        """An aligned plain-text table under its title."""
        cells = [list(self.columns)] + self.cells()
        widths = [max(len(row[n]) for row in cells) for n in range(len(self.columns))]
        lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
        return "\n".join([self.title, *lines])

    def csv(self):
        """CSV with a header; numbers exactly (repr), so that reading them back gives the same floats."""
        return "\n".join(",".join(row) for row in [list(self.columns)] + self.cells(exact=True)) + "\n"

    def html(self, caption=True):
        """An HTML table, numbers to 6 digits, the title as its caption."""
        head = "".join(f"<th>{html.escape(column)}</th>" for column in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>\n" for row in self.cells()
        )
        title = f"<caption>{html.escape(self.title)}</caption>" if caption else ""
        return f"<table>{title}\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody></table>"

    def _repr_html_(self):
        return self.html()


def _cell(value, exact):
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    return repr(float(value)) if exact else f"{value:.6g}"


def symbol(name):
    """A sequence's or parameter's name in mathtext (and LaTeX): h as a bold h, W_hh as a bold W, upright hh below."""
    base, _, sub = name.partition("_")
    return rf"\mathbf{{{base}}}" + (rf"_{{\mathrm{{{sub}}}}}" if sub else "")
