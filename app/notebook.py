"""Derivations and gradient-flow analyses that display themselves in Jupyter.

    from bptt.app.notebook import analyze, derive

    derive("elman")                    # the derivation: Markdown with LaTeX, or LaTeX alone
    analyze("lstm", steps=60)          # the four plots in one PNG, the tables as Markdown
    analyze("examples/gated_rnn.py:gated_rnn", radii=(0.5, 1.0, 1.5)).save("plots/")

A model is a zoo name, a user's "path/to/file.py:function", or a Model. Jupyter calls the
_repr_markdown_, _repr_latex_ and _repr_png_ methods; anything else can call them too.
"""

import math
import numbers

from bptt.app import analyze as _analysis
from bptt.app import plots as _plots
from bptt.derive.model import Model
from bptt.derive.models import load
from bptt.documents.document import sections
from bptt.documents.render import document


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
        """The document `bptt latex MODEL --format md` prints."""
        return document(self.model, "md")

    def _repr_latex_(self):
        """Every equation in one display, aligned on its '=', a section's title before its equations."""
        rows = []
        for section in self.sections:
            rows.append(rf"&\textrm{{{section.title}}}")
            for eq in section.equations:
                rows += [f"{eq.lhs} &= {eq.rhs}"] if len(eq.rows) < 2 else list(eq.rows)
        return "$$\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}$$"

    def __repr__(self):
        return f"<derivation of {self.model.name}: {len(self.sections)} sections>"


def derive(model):
    """The Derivation of a model, for display."""
    return Derivation(model)


class Analysis:
    """A gradient-flow analysis: `.tables` hold the numbers behind its plots (see bptt.app.analyze)."""

    def __init__(self, analysis):
        self.analysis = analysis
        self.tables = analysis.tables

    def table(self, name):
        return self.analysis.table(name)

    def figures(self):
        """{table name: a matplotlib Figure}; needs bptt[plots]."""
        return _plots.figures(self.analysis)

    def save(self, folder):
        """Write a PNG and a CSV per table into an existing folder; the paths. Needs bptt[plots]."""
        return _plots.write(self.analysis, folder)

    def _repr_png_(self):
        """The four plots in one PNG; None (nothing to show) without matplotlib."""
        try:
            return _plots.png(_plots.overview(self.analysis))
        except _plots.MissingMatplotlib:
            return None

    def _repr_markdown_(self):
        a = self.analysis
        head = f"Gradient flow of **{a.model}**: T = {a.steps}, seed {a.seed}, one random sequence."
        return "\n\n".join([head, *(table.markdown() for table in a.tables)]) + "\n"

    def __repr__(self):
        return f"<gradient-flow analysis of {self.analysis.model}: {', '.join(t.name for t in self.tables)}>"


def analyze(model, steps=_analysis.STEPS, seed=0, radii=_analysis.RADII, theta=_analysis.THETA):
    """Measure gradient flow through a model (bptt.app.analyze.analyze), for display: steps a positive
    integer, seed a non-negative one, radii one or more positive numbers, theta a positive number."""
    steps, seed, radii = _integer("steps", steps, 1), _integer("seed", seed, 0), _radii(radii)
    if not _positive(theta):
        raise ValueError(f"theta must be a positive number, got {theta!r}")
    return Analysis(_analysis.analyze(_model(model), steps, seed, radii, float(theta)))
