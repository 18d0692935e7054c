"""The same analysis gives the same PNG, byte for byte, every time it is drawn: the plots' constrained layout (solved
by kiwisolver, whose sums follow where its variables sit in memory) is settled on a grid (canvas.SettledLayout), so
that a layout a last bit apart cannot flip a line's edge pixel between two shades (the notebook's overview did)."""

import functools
import hashlib

import pytest

pytest.importorskip("matplotlib", reason="the plots need matplotlib (pip install 'bptt[plots]')")

from matplotlib.layout_engine import ConstrainedLayoutEngine

from bptt.app.analysis import canvas, plots
from bptt.app.analysis.analyze import analyze
from bptt.derive.models import load


@functools.cache
def analysis():
    """linear's: a plot of an Axes and its twin, of log axes, an aspect-locked one, legends below them."""
    return analyze(load("linear"), 12)


def places(figure):
    """Where every subfigure and Axes of the figure sits in its parent, each a tuple."""
    boxes = [tuple(part.bbox_relative.get_points().ravel()) for part in canvas.subfigures(figure)]
    return boxes + [tuple(axes.get_position(original=True).bounds) for axes in figure.get_axes()]


class Moved(ConstrainedLayoutEngine):
    """matplotlib's constrained layout, its places then moved by `nudge` of their parent, as the solver's last bits
    move from one draw to the next."""

    def __init__(self, nudge):
        super().__init__()
        self.nudge = nudge

    def execute(self, figure):
        laid = super().execute(figure)
        for part in canvas.subfigures(figure):
            part.bbox_relative.set_points(part.bbox_relative.get_points() + self.nudge)
        for axes in figure.get_axes():
            axes.set_position([value + self.nudge for value in axes.get_position(original=True).bounds])
        return laid


class MovedThenSettled(canvas.SettledLayout, Moved):
    """Moved, then settled: the layout plots draw with, given a solution a last bit apart."""


def laid_out(make, engine):
    figure = make(analysis())
    figure.set_layout_engine(engine)
    figure.draw_without_rendering()
    return places(figure)


def test_a_layout_a_last_bit_apart_is_settled_in_the_same_places():
    """A plot (a subfigure holding an Axes and its twin): its layout moved by +-1e-14 of the parent (ten times what
    the solver's draws differ by) is settled in the same places, to the bit, each a multiple of 1/GRID."""
    make = lambda found: plots.figures(found)["alignment"]  # noqa: E731
    assert isinstance(make(analysis()).get_layout_engine(), canvas.SettledLayout)
    up, down = (laid_out(make, MovedThenSettled(nudge)) for nudge in (1e-14, -1e-14))
    assert len(up) > 2 and up == down
    assert all(float(value * canvas.GRID).is_integer() for place in up for value in place)
    assert laid_out(make, Moved(1e-14)) != laid_out(make, Moved(-1e-14))


def test_the_overview_draws_the_same_bytes_every_time():
    """The notebook's overview (every plot in one figure, each in a subfigure of a grid) drawn twice is one PNG
    (before, two or three different ones in eight draws)."""
    first, second = (plots.png(plots.overview(analysis())) for _ in range(2))
    assert hashlib.sha256(first).hexdigest() == hashlib.sha256(second).hexdigest()
