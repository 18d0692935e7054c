"""What every plot draws with: matplotlib's Agg canvas, its renderers sharing one mathtext parser, and a constrained
layout settled on a grid.

Each Agg renderer makes its own parser, whose cache of parsed labels (the log axes' 10^k, the columns' symbols) then
serves one figure only; shared, a label parsed for one plot serves every plot after it (a third of the drawing time).

The constrained layout's solver (kiwisolver) orders its sums by where its variables sit in memory, so the same figure
is laid out a last bit apart from one draw to the next, and a line's edge pixel could flip between two shades: the
same data gave another PNG. Settled, each subfigure and Axes sits at a multiple of 1/GRID of its parent, the same
every time (a binary grid: a place of few decimals, 0.495, is on no boundary between two of its points)."""

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.layout_engine import ConstrainedLayoutEngine

MATHTEXT = RendererAgg(1, 1, 72).mathtext_parser  # the parser an Agg renderer makes for itself
GRID = 2**30  # about a billionth of a (sub)figure


class Canvas(FigureCanvasAgg):
    """An Agg canvas (png() draws on it, and so does Figure.draw_without_rendering) whose renderers use MATHTEXT."""

    def get_renderer(self):
        renderer = super().get_renderer()
        renderer.mathtext_parser = MATHTEXT
        return renderer


class SettledLayout(ConstrainedLayoutEngine):
    """matplotlib's constrained layout, each place it finds rounded to 1/GRID of its parent."""

    def execute(self, figure):
        laid = super().execute(figure)
        for part in subfigures(figure):
            part.bbox_relative.set_points(on_grid(part.bbox_relative.get_points()))
        for axes in figure.get_axes():
            axes.set_position(on_grid(axes.get_position(original=True).bounds))
        return laid


def on_grid(values):
    """values (an array, or a sequence of numbers) rounded to multiples of 1/GRID."""
    return np.round(np.asarray(values) * GRID) / GRID


def subfigures(figure):
    """Every subfigure of the figure, theirs too."""
    parts = list(figure.subfigs)
    for part in parts:
        parts += part.subfigs
    return parts
