"""What an Analysis shows: a progress bar on a terminal while it measures, and PNG plots with matplotlib (the
optional extra bptt[plots]), imported only when a plot is asked for (app/analysis/drawing.py draws each)."""

import io
import pathlib
import time

from bptt.app.analysis.drawing import draw
from bptt.app.files import output_target, write_atomic

MISSING = "the plots need matplotlib, which is not installed: pip install 'bptt[plots]'"
SIZE, DPI = (6.4, 4.8), 100  # one plot: 640 x 480 pixels
TALL = 7.2  # a plot of two rows of panels: 720 pixels high
OVERVIEW = (14.0, 5.0), 80  # a row of two plots in the overview: 1120 x 400 pixels


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


def _figure(size, dpi):
    try:
        from matplotlib.figure import Figure  # no pyplot: nothing global changes (a notebook keeps its backend)

        from bptt.app.analysis.canvas import Canvas, SettledLayout
    except ImportError as error:
        raise MissingMatplotlib(MISSING) from error
    figure = Figure(figsize=size, dpi=dpi, layout=SettledLayout())
    Canvas(figure)  # the figure's canvas from now on
    return figure


def require():
    """Raise MissingMatplotlib now rather than after the measurements."""
    _figure(SIZE, DPI)


def panels(table):
    """How many panels a table's plot has side by side: one per radius or per matrix, else one."""
    column = {"eigenvalues": "matrix"}.get(table.name, "radius" if table.name.startswith("gradient_norms") else None)
    return len(dict.fromkeys(table.column(column))) if column else 1


def figures(analysis):
    """{table name: a Figure of its plot}, 640 x 480 pixels for up to two panels side by side, wider for more, and
    taller for two rows."""
    out = {}
    for table in analysis.tables:
        width, height = SIZE
        height = TALL if table.name.startswith("gradient_norms") else height  # two rows of panels
        figure = _figure((width * max(1, panels(table) / 2), height), DPI)
        figure.suptitle(f"{analysis.model}: T = {analysis.steps}, seed {analysis.seed}", fontsize="small")
        draw(figure.subfigures(), table)
        out[table.name] = figure
    return out


def overview(analysis):
    """Every plot in one Figure, two to a row."""
    rows = (len(analysis.tables) + 1) // 2
    (width, height), dpi = OVERVIEW
    figure = _figure((width, height * rows), dpi)
    subfigures = figure.subfigures(rows, 2, squeeze=False).ravel()
    for subfigure, table in zip(subfigures, analysis.tables, strict=False):
        draw(subfigure, table)
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
    """Write <table>.png and <table>.csv for every table into folder, made first if it does not exist (as mkdir
    makes it, its parent already there), each file whole or not at all (as `bptt latex -o` writes: through
    symlinks, never over a folder, FIFO or device); the paths."""
    folder = pathlib.Path(folder)
    images = {name: png(figure) for name, figure in figures(analysis).items()}
    folder.mkdir(exist_ok=True)
    targets(folder, [table.name for table in analysis.tables])
    written = []
    for table in analysis.tables:
        for suffix, data in ((".png", images[table.name]), (".csv", table.csv().encode())):
            write_atomic(folder / f"{table.name}{suffix}", data)
            written.append(folder / f"{table.name}{suffix}")
    return written
