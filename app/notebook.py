"""Derivations and gradient-flow analyses that display themselves in Jupyter.

    from bptt.app.notebook import analyze, derive

    derive("elman")                    # the derivation: Markdown with LaTeX, or LaTeX alone
    analyze("lstm", steps=60)          # the plots in one PNG above the tables, folded
    analyze("lstm").table("carousel")  # one table, displayed as a table
    analyze("examples/gated_rnn.py:gated_rnn", radii=(0.5, 1.0, 1.5)).save("plots/")
    exercises("elman", seed=3)         # the problem sheet, its solutions folded below it

A model is a zoo name, a user's "path/to/file.py:function", or a Model. Jupyter calls the _repr_*_
methods and shows the richest: HTML for an analysis (its PNG embedded, so that the plots show wherever
HTML does) and for a table; anything else can call them too.
"""

import base64
import collections
import html
import math
import numbers

from bptt.app import files as _files
from bptt.app.analysis import analyze as _analysis
from bptt.app.analysis import plots as _plots
from bptt.derive.model import Model
from bptt.derive.models import load
from bptt.documents.document import sections
from bptt.documents.exercises.render import sheets
from bptt.documents.render import rendered


def _model(model):
    if isinstance(model, Model):
        return model
    if isinstance(model, str):
        return load(model)
    raise TypeError(f"model must be a zoo name, 'path/to/file.py:function' or a Model, got {type(model).__name__}")


def _integer(name, value, least):
    """value, an integer (Python's or NumPy's, not a bool) >= least, else ValueError naming it."""
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= least):
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return int(value)


def _positive(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < math.inf


def _radii(radii):
    """radii as a tuple of floats: one or more positive finite numbers, else ValueError."""
    found = () if isinstance(radii, (str, bytes)) or not hasattr(radii, "__iter__") else tuple(radii)
    if not found or not all(map(_positive, found)):
        raise ValueError(f"radii must be one or more positive numbers, e.g. (0.5, 1, 1.5); got {radii!r}")
    return tuple(float(r) for r in found)


class Derivation:
    """A model's derivation of BPTT: `.sections` hold its equations, each with the sentence behind it."""

    def __init__(self, model):
        self.model = _model(model)
        self.sections = sections(self.model)

    def _repr_markdown_(self):
        """The document `bptt latex MODEL --format md` prints (its figures inline SVG), from the sections held."""
        return rendered(self.model, self.sections, "md")

    def _repr_latex_(self):
        """Every equation in one display, aligned on its '=', a section's title before its equations, and before
        each equation whose left-hand side another of its section shares (the truncation variants of dL/dh_t),
        the head of its sentence as its label."""
        rows = []
        for section in self.sections:
            rows.append(rf"&\textrm{{{section.title}}}")
            shared = collections.Counter(eq.lhs for eq in section.equations)
            for eq in section.equations:
                label = _head(eq.why) if shared[eq.lhs] > 1 else ""
                rows += [rf"&\quad\text{{{label}:}}"] if label else []
                rows += [f"{eq.lhs} &= {eq.rhs}"] if len(eq.rows) < 2 else list(eq.rows)
        return "$$\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}$$"

    def __repr__(self):
        return f"<derivation of {self.model.name}: {len(self.sections)} sections>"


def _head(sentence):
    """The sentence up to its first ':' or '.' outside $...$ ("Chunks of $\\tau$ steps"), stripped."""
    inside = False
    for n, char in enumerate(sentence):
        inside = inside != (char == "$")
        if char in ":." and not inside:
            return sentence[:n].strip()
    return sentence.strip()


def derive(model):
    """The Derivation of a model, for display."""
    return Derivation(model)


class Analysis:
    """A gradient-flow analysis: `.tables` hold the numbers behind its plots (see bptt.app.analysis.analyze)."""

    def __init__(self, analysis):
        self.analysis = analysis
        self.tables = analysis.tables
        self._png = None  # the overview's PNG, once drawn

    def table(self, name):
        return self.analysis.table(name)

    def figures(self):
        """{table name: a matplotlib Figure}; needs bptt[plots]."""
        return _plots.figures(self.analysis)

    def save(self, folder):
        """Write a PNG and a CSV per table into folder (made if only its parent exists); the paths. Needs
        bptt[plots]. As `bptt analyze -o`: a folder that cannot be made or written, or a file in the way,
        raises a ValueError (files.OutputError) or an OSError in one line, before anything is written."""
        return _plots.write(self.analysis, _files.writable_folder(folder, "save"))

    def _repr_png_(self):
        """Every plot in one PNG (drawn once); None (nothing to show) without matplotlib."""
        if self._png is None:
            try:
                self._png = _plots.png(_plots.overview(self.analysis))
            except _plots.MissingMatplotlib:
                return None
        return self._png

    def _repr_html_(self):
        """A line saying what was measured, the plots (the PNG embedded), then each table folded under its title."""
        a = self.analysis
        scale = f", the cell's input weights and biases times {a.scale:g}" if a.scale != 1 else ""
        parts = [
            f"<p>Gradient flow of <b>{html.escape(a.model)}</b>: T = {a.steps}, seed {a.seed}, "
            f"one random sequence{scale}.</p>"
        ]
        image = self._repr_png_()
        if image:
            data = base64.b64encode(image).decode("ascii")
            parts.append(f'<img src="data:image/png;base64,{data}" alt="the plots of the gradient-flow analysis">')
        else:
            parts.append(f"<p>No plots: {html.escape(_plots.MISSING)}.</p>")
        for table in a.tables:
            summary = f"{html.escape(table.title)} ({len(table.rows)} rows)"
            parts.append(f"<details><summary>{summary}</summary>\n{table.html(caption=False)}\n</details>")
        return "\n".join(parts) + "\n"

    def __repr__(self):
        return f"<gradient-flow analysis of {self.analysis.model}: {', '.join(t.name for t in self.tables)}>"


def analyze(model, steps=_analysis.STEPS, seed=0, radii=None, g_max=None, scale=None):
    """Measure gradient flow through a model (bptt.app.analysis.analyze.analyze), for display: steps a positive
    integer, seed a non-negative one, radii None (0.5, 1, 1.5 and a radius where the gradient grows) or one or more
    positive numbers, g_max the clipping threshold (None: between the smallest and the largest measured norm) or a
    positive number, scale None (the cell kept nearly linear, and input scale 1 too) or a positive number (1: the
    module's initialisation)."""
    steps, seed = _integer("steps", steps, 1), _integer("seed", seed, 0)
    radii = None if radii is None else _radii(radii)
    for name, value in (("g_max", g_max), ("scale", scale)):
        if value is not None and not _positive(value):
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    g_max, scale = (None if value is None else float(value) for value in (g_max, scale))
    return Analysis(_analysis.analyze(_model(model), steps, seed, radii, g_max, scale))


class Exercises:
    """An exercise: `.problems` and `.solutions`, its two sheets as Markdown with LaTeX (`bptt exercises`)."""

    def __init__(self, model, seed):
        self.model, self.seed = _model(model), seed
        texts = sheets(self.model, seed, "md")
        self.problems, self.solutions = texts["problems"], texts["solutions"]

    def _repr_markdown_(self):
        """The problem sheet, then the solution sheet folded under a summary a click opens."""
        return (
            f"{self.problems}\n<details><summary>Solutions (click to open)</summary>\n\n{self.solutions}\n</details>\n"
        )

    def __repr__(self):
        return f"<exercises on {self.model.name}, seed {self.seed}>"


def exercises(model, seed=0):
    """The exercise of a seed (a non-negative integer) on a model, for display: its solutions folded."""
    return Exercises(model, _integer("seed", seed, 0))
