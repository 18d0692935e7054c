"""What an Analysis shows: its tables (text, CSV, Markdown), a progress bar on a terminal, and PNG plots
with matplotlib (the optional extra bptt[plots]), imported only when a plot is asked for.

Each plotted artist is drawn from one table's columns and carries a gid naming them,
`table, x column, y column, column=value;...` (the rows it takes: all when no condition is given),
so that the data behind a plot can be read back and compared with the printed table.
"""

import io
import pathlib
import time
from dataclasses import dataclass

from bptt.app.files import output_target, write_atomic

MISSING = "the plots need matplotlib, which is not installed: pip install 'bptt[plots]'"
SIZE, DPI = (6.4, 4.8), 100  # one plot: 640 x 480 pixels
OVERVIEW = (11.0, 8.0), 80  # the four plots together: 880 x 640 pixels


@dataclass(frozen=True)
class Table:
    """The numbers behind one plot: named columns, rows of numbers (or names)."""

    name: str  # the file stem of its plot and CSV, e.g. "gradient_norms"
    title: str
    columns: tuple
    rows: tuple

    def __post_init__(self):
        object.__setattr__(self, "rows", tuple(tuple(row) for row in self.rows))

    def column(self, name):
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

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

    def markdown(self):
        rows = [list(self.columns), ["---:"] * len(self.columns)] + self.cells()
        cells = [[cell.replace("|", "\\|") for cell in row] for row in rows]  # a bare | would end the cell
        return f"**{self.title}**\n\n" + "\n".join("| " + " | ".join(row) + " |" for row in cells)


def _cell(value, exact):
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    return repr(float(value)) if exact else f"{value:.6g}"


class ProgressBar:
    """progress(done, total) drawn as a bar on a terminal stream, once a run has taken `delay` seconds."""

    def __init__(self, label, stream, width=30, delay=0.5, clock=time.monotonic):
        self.label, self.stream, self.width, self.delay, self.clock = label, stream, width, delay, clock
        self.start, self.shown = clock(), False

    def __call__(self, done, total):
        if not self.shown and (done >= total or self.clock() - self.start < self.delay):
            return
        filled = self.width * done // total
        line = f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}"
        self.stream.write(line if done < total else "\r" + " " * (len(line) - 1) + "\r")
        self.stream.flush()
        self.shown = done < total


class MissingMatplotlib(RuntimeError):
    """matplotlib is not installed; the message names the extra that brings it."""


def _figure(size, dpi, panels=(1, 1)):
    try:
        from matplotlib.figure import Figure  # no pyplot: nothing global changes (a notebook keeps its backend)
    except ImportError as error:
        raise MissingMatplotlib(MISSING) from error
    figure = Figure(figsize=size, dpi=dpi, layout="constrained")
    return figure, figure.subplots(*panels, squeeze=False).ravel()


def require():
    """Raise MissingMatplotlib now rather than after the measurements."""
    _figure(SIZE, DPI)


def gid(table, x, y, **where):
    """`table<TAB>x column<TAB>y column<TAB>column=value;...`: tabs, since column names hold '|'."""
    return "\t".join([table.name, x, y, ";".join(f"{column}={value!r}" for column, value in where.items())])


def _rows_where(table, column, value):
    index = table.columns.index(column)
    return [row for row in table.rows if row[index] == value]


def _series(table, rows, x, y):
    return [row[table.columns.index(x)] for row in rows], [row[table.columns.index(y)] for row in rows]


def _radii(table):
    return list(dict.fromkeys(table.column("radius")))


def draw_norms(ax, table):
    """Each measured column against T - t, one colour per radius: the gradient solid, the Jacobian products dashed."""
    measured = [c for c in table.columns if c not in ("radius", "T-t")]
    styles = dict(zip(measured, ["-", "--", "-.", (0, (5, 1, 1, 1, 1, 1))], strict=False)) | {"bound": ":"}
    for n, radius in enumerate(_radii(table)):
        rows = _rows_where(table, "radius", radius)
        for column in measured:
            style = styles.get(column, "--")
            xs, ys = _series(table, rows, "T-t", column)
            ax.plot(
                xs,
                ys,
                linestyle=style,
                color=f"C{n}",
                label=f"{column}, radius {radius:g}",
                gid=gid(table, "T-t", column, radius=radius),
            )
    ax.set(yscale="log", xlabel="T - t", ylabel="norm", title="Gradient flow back from step T")
    ax.legend(fontsize="x-small", ncol=len(measured))


def draw_eigenvalues(ax, table):
    """The eigenvalues in the complex plane, one colour per radius, one marker per matrix, and the unit circle."""
    import numpy as np

    angles = np.linspace(0, 2 * np.pi, 361)
    ax.plot(np.cos(angles), np.sin(angles), color="grey", linewidth=0.8, label="unit circle")
    matrices = list(dict.fromkeys(table.column("matrix")))
    for n, radius in enumerate(_radii(table)):
        for m, matrix in enumerate(matrices):
            rows = [row for row in _rows_where(table, "radius", radius) if row[1] == matrix]
            xs, ys = _series(table, rows, "re", "im")
            ax.scatter(
                xs,
                ys,
                color=f"C{n}",
                marker="o^sDv<>p"[m % 8],
                s=18,
                gid=gid(table, "re", "im", radius=radius, matrix=matrix),
            )
        ax.plot([], [], "o", color=f"C{n}", label=f"radius {radius:g}")
    ax.set(
        aspect="equal", adjustable="datalim", xlabel="Re", ylabel="Im", title="Eigenvalues of " + ", ".join(matrices)
    )
    ax.legend(fontsize="x-small")


def draw_alignment(ax, table):
    """|cos(M^k x, v1)| against k, and on a log axis the tangent of the angle with its bound."""
    xs, ys = _series(table, table.rows, "k", "cos")
    ax.plot(xs, ys, "-", color="C0", label="|cos|", gid=gid(table, "k", "cos"))
    ax.set(ylim=(0, 1.05), xlabel="k", ylabel="|cos(M^k x, v1)|", title="M^k x aligns with the top eigenvector")
    twin = ax.twinx()
    for column, style in (("tan", "--"), ("bound", ":")):
        xs, ys = _series(table, table.rows, "k", column)
        twin.plot(xs, ys, style, color="C1", label=column, gid=gid(table, "k", column))
    twin.set(yscale="log", ylabel="tan of the angle, (|l2|/|l1|)^k tan at 0")
    ax.legend(loc="center right", fontsize="x-small")
    twin.legend(loc="upper right", fontsize="x-small")


def draw_clipping(ax, table):
    """The gradient's norm before and after clip_grads for each radius, with theta."""
    positions = range(len(table.rows))
    for offset, column in ((-0.2, "norm"), (0.2, "clipped")):
        heights = table.column(column)
        ax.bar([p + offset for p in positions], heights, width=0.4, label=column, gid=gid(table, "radius", column))
    theta = table.column("theta")[0]
    ax.axhline(theta, color="grey", linestyle=":", label=f"theta = {theta:g}", gid=gid(table, "", "theta"))
    ax.set_xticks(list(positions), [f"{r:g}" for r in table.column("radius")])
    ax.set(yscale="log", xlabel="spectral radius", ylabel="global gradient norm", title="clip_grads")
    ax.legend(fontsize="x-small")


DRAW = {
    "gradient_norms": draw_norms,
    "eigenvalues": draw_eigenvalues,
    "alignment": draw_alignment,
    "clipping": draw_clipping,
}


def figures(analysis):
    """{table name: a Figure of its plot}."""
    out = {}
    for table in analysis.tables:
        figure, (ax,) = _figure(SIZE, DPI)
        DRAW[table.name](ax, table)
        figure.suptitle(f"{analysis.model}: T = {analysis.steps}, seed {analysis.seed}", fontsize="small")
        out[table.name] = figure
    return out


def overview(analysis):
    """The four plots in one Figure."""
    figure, axes = _figure(*OVERVIEW, panels=(2, 2))
    for ax, table in zip(axes, analysis.tables, strict=True):
        DRAW[table.name](ax, table)
    figure.suptitle(f"{analysis.model}: T = {analysis.steps}, seed {analysis.seed}")
    return figure


def png(figure):
    """The PNG bytes of a Figure, without the version stamp (so that the same data gives the same file)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def targets(folder, names):
    """The files <name>.png and <name>.csv in folder: each a regular file (through its symlinks) or none
    yet, else OutputError naming it (render.output_target), before anything is written."""
    return [output_target(pathlib.Path(folder) / f"{name}{suffix}") for name in names for suffix in (".png", ".csv")]


def write(analysis, folder):
    """Write <table>.png and <table>.csv for every table into folder, each file whole or not at all (as
    `bptt latex -o` writes: through symlinks, never over a folder, FIFO or device); the paths."""
    folder = pathlib.Path(folder)
    targets(folder, [table.name for table in analysis.tables])
    images = {name: png(figure) for name, figure in figures(analysis).items()}
    written = []
    for table in analysis.tables:
        for suffix, data in ((".png", images[table.name]), (".csv", table.csv().encode())):
            write_atomic(folder / f"{table.name}{suffix}", data)
            written.append(folder / f"{table.name}{suffix}")
    return written
