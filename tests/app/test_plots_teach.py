"""The plots teach what they claim, checked on the plotted data: the clipping threshold between the measured norms
(a bar clipped, a bar left alone), every title saying its regime, the nearly linear and the saturated regime side by
side, no curve on top of another, the carousel named as the documents name it and its growth explained, a GRU
radius where the gradient grows, legends off the curves, and one name for the threshold everywhere."""

import functools
import inspect
import itertools
import re

import numpy as np
import pytest

from bptt.app import cli, notebook
from bptt.app.analysis import plots
from bptt.app.analysis.analyze import analyze
from bptt.app.analysis.table import symbol
from bptt.derive.models import load
from bptt.derive.nodes import T, t
from bptt.documents.carousel_document import direct_name, every_path_name
from bptt.documents.render import document
from bptt.runtime import jax as runtime_jax
from bptt.runtime import numpy as runtime_numpy
from bptt.runtime import torch as runtime_torch

STEPS = 40
SATURATED = "gradient_norms_saturated"
REGIME = re.compile(r"^(nearly linear|saturated|linear), input scale \S+, spectral radius [\d.]+(, [\d.]+)*$")


@functools.cache
def analysis_of(model):
    """analyze(load(model), STEPS), once per test process: the fixture and the tests of one model read the same."""
    return analyze(load(model), STEPS)


@functools.cache
def figures_of(model):
    """plots.figures(analysis_of(model)), made once per test process (nothing draws on them after)."""
    return plots.figures(analysis_of(model))


@pytest.fixture(scope="module", params=["linear", "elman", "gru", "lstm"])
def drawn(request):
    """(analysis, {table name: Figure}) at the command's defaults, every figure laid out once as png() lays it out
    (every mathtext label parsed and measured), without the pixels (test_analyze.py checks the PNGs)."""
    analysis, figures = analysis_of(request.param), figures_of(request.param)
    for figure in figures.values():
        figure.draw_without_rendering()
    return analysis, figures


@functools.cache
def legends(figure):
    """Every legend of the figure, its subfigures and axes (found once: nothing adds one after)."""
    return tuple(figure.findobj(lambda artist: hasattr(artist, "legend_handles")))


def legend_entries(figure):
    """[(text, handle)] of every legend of the figure, its subfigures and axes."""
    return [
        (text.get_text(), h)
        for leg in legends(figure)
        for text, h in zip(leg.get_texts(), leg.legend_handles, strict=True)
    ]


def titles(figure):
    """The suptitles of the figure's subfigures: what each plot shows, over its regime."""
    return [sub._suptitle.get_text() for sub in figure.subfigs if sub._suptitle is not None]


def curves(ax):
    return [line for line in ax.get_lines() if line.get_gid()]


@functools.cache
def all_axes(figure):
    """Every axes of the figure and its subfigures (found once: nothing adds one after)."""
    return tuple(figure.findobj(lambda artist: hasattr(artist, "get_yscale") and hasattr(artist, "get_lines")))


def test_the_threshold_lies_between_the_measured_norms(drawn):
    """The bars before clipping straddle the threshold's line: the largest is cut to g_max, the smallest kept."""
    _, figures = drawn
    (ax,) = all_axes(figures["clipping"])
    bars = {}
    for patch in ax.patches:
        bars.setdefault(patch.get_gid().split("\t")[2], []).append(patch.get_height())
    (line,) = [line for line in ax.get_lines() if (line.get_gid() or "").startswith("clipping\t\t")]  # y: the threshold
    g_max = line.get_ydata()[0]
    before, after = np.array(bars["norm"]), np.array(bars["clipped"])
    assert before.min() < g_max < before.max()
    assert np.any(after < before) and np.any(after == before)
    assert np.allclose(after, np.minimum(before, g_max), rtol=1e-12)


def test_every_title_says_its_regime(drawn):
    """Nearly linear or saturated (or the linear cell), the input scale and the spectral radii; the alignment
    exercise, which runs no sequence, says so and gives M's radius."""
    analysis, figures = drawn
    for table in analysis.tables:
        (title,) = titles(figures[table.name])
        assert title.endswith("\n" + table.regime) and title.split("\n")[0][0].isupper(), title
        if table.name == "alignment":
            assert table.regime.startswith("no input, ") and "spectral radius" in table.regime
            continue
        assert REGIME.match(table.regime), table.regime
        assert f"input scale {analysis.scale:g}" in table.regime or table.name == SATURATED
        radii = (min(analysis.radii),) if table.name == "carousel" else analysis.radii
        assert table.regime.endswith("spectral radius " + ", ".join(f"{r:g}" for r in radii))
    words = analysis.table("gradient_norms").regime.split(",")[0]
    assert words == ("linear" if analysis.model == "linear" else "nearly linear")


def test_elman_shows_both_regimes_side_by_side():
    """At the default scale (1e-10) elman is the linear cell: its plot says so, and beside it, at input scale 1, the
    saturated tanh vanishes at every radius, where the nearly linear one explodes at 1.5."""
    analysis = analysis_of("elman")
    names = [table.name for table in analysis.tables]
    assert names[:2] == ["gradient_norms", SATURATED]  # one row of the overview, two to a row
    linear, saturated = analysis.table("gradient_norms"), analysis.table(SATURATED)
    assert linear.regime.startswith(f"nearly linear, input scale {analysis.scale:g}") and analysis.scale < 1e-6
    assert saturated.regime.startswith("saturated, input scale 1,")
    product = linear.columns.index("|dh_T/dh_t|")
    last = {(name, row[0]): row[product] for name in names[:2] for row in analysis.table(name).rows if row[1] == STEPS}
    assert last["gradient_norms", 1.5] > 1e6 and all(last[SATURATED, r] < 1e-3 for r in analysis.radii)
    overview = plots.overview(analysis)
    assert [titles(sub) for sub in overview.subfigs[:2]] == [[], []]  # titled themselves:
    assert [sub._suptitle.get_text().split("\n")[1] for sub in overview.subfigs[:2]] == [
        linear.regime,
        saturated.regime,
    ]
    overview.draw_without_rendering()  # lays it out as png() does, without the pixels
    left, right = (sub.bbox for sub in overview.subfigs[:2])
    assert left.y0 == right.y0 and left.x1 <= right.x0  # one row, the nearly linear on the left


def test_no_curve_hides_another(drawn):
    """On one axes, no two curves run within 25 % of each other over a fifth of their points (at 62a652d the
    radius-1 upper bound ran along the radius-1.5 product; a GRU's carousel and every path coincided)."""
    _, figures = drawn
    for name, figure in figures.items():
        for ax in all_axes(figure):
            for one, other in itertools.combinations(curves(ax), 2):
                a, b = np.asarray(one.get_ydata(), float), np.asarray(other.get_ydata(), float)
                close = np.mean(np.abs(np.log(a / b)) < np.log(1.25))
                assert close < 0.2, (name, one.get_gid(), other.get_gid(), close)


def test_legends_cover_no_curve(drawn):
    """Every legend lies outside every axes (its box meets no axes' box, where the curves are), where the PNG shows
    them: the fixture laid each figure out as png() does, and nothing has moved them since (the renderer that laid
    it out, of the figure's dpi, which png() draws at, measures the legends' texts)."""
    _, figures = drawn
    for name, figure in figures.items():
        renderer = figure.canvas.get_renderer()
        assert renderer.dpi == figure.dpi, name
        assert legends(figure), name
        for legend, ax in itertools.product(legends(figure), all_axes(figure)):
            box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
            assert not box.overlaps(area), (name, ax.get_title())


def test_every_colour_and_line_style_drawn_has_a_legend_entry(drawn):
    import matplotlib.colors  # here: a worker that runs no plot test loads none

    analysis, figures = drawn
    for name in ("gradient_norms", "carousel"):
        if name not in figures:
            continue
        entries = legend_entries(figures[name])
        shown = {(matplotlib.colors.to_hex(h.get_color()), h.get_linestyle(), h.get_marker()) for _, h in entries}
        lines = [line for ax in all_axes(figures[name]) for line in curves(ax)]
        assert lines
        for line in lines:
            key = (matplotlib.colors.to_hex(line.get_color()), line.get_linestyle(), line.get_marker())
            assert key in shown, line.get_gid()
        table = analysis.table(name)
        texts = " ".join(text for text, _ in entries) + " ".join(ax.get_title() for ax in all_axes(figures[name]))
        assert all(table.label(c) in texts for c in table.columns[2:] if c != "step_radius")


def test_the_eigenvalues_of_each_matrix_have_a_panel(drawn):
    analysis, figures = drawn
    table = analysis.table("eigenvalues")
    matrices = list(dict.fromkeys(table.column("matrix")))
    axes = all_axes(figures["eigenvalues"])
    assert [ax.get_title() for ax in axes] == [f"${symbol(m)}$" for m in matrices]
    for ax, matrix in zip(axes, matrices, strict=True):
        assert {c.get_gid().split("matrix=")[1] for c in ax.collections if c.get_gid()} == {repr(matrix)}
    texts = {text for text, _ in legend_entries(figures["eigenvalues"])}
    assert {f"spectral radius {r:g}" for r in analysis.radii} | {"unit circle"} <= texts


def test_a_loose_bound_is_drawn_on_top_and_says_so(drawn):
    analysis, figures = drawn
    table = analysis.table("gradient_norms")
    lines = [line for ax in all_axes(figures["gradient_norms"]) for line in curves(ax)]
    bounds = [line for line in lines if line.get_gid().split("\t")[2] == "upper_bound"]
    notes = [text.get_text() for ax in all_axes(figures["gradient_norms"]) for text in ax.texts]
    if "upper_bound" not in table.columns:
        assert not bounds and notes == []
        return
    assert min(b.get_zorder() for b in bounds) > max(o.get_zorder() for o in lines if o not in bounds)
    rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    top = max(rows, key=lambda row: (row["upper_bound"], row["T-t"]))
    assert top["upper_bound"] > 10 * top["|dh_T/dh_t|"]
    assert notes == [f"an upper bound, loose:\n{top['upper_bound']:.2g}, measured {top['|dh_T/dh_t|']:.2g}"]


def test_the_carousel_is_named_as_the_documents_name_it_and_its_growth_explained():
    """D^c_k and Phi^c_{T,t}, the flow section's own macros; each gate bias names torch's two biases and the step
    Jacobian's spectral radius, above 1 exactly where the every-path curve grows."""
    analysis = analysis_of("lstm")
    table = analysis.table("carousel")
    text = document(load("lstm"), "tex")
    c = next(s for s in load("lstm").states if s.name == "c")
    for name in (direct_name(c), every_path_name(c)):
        assert name in text, name
    assert direct_name(c, T) in table.label("prod f_k") and direct_name(c, t + 1) in table.label("prod f_k")
    assert every_path_name(c) in table.label("|dc_T/dc_t|")
    assert table.label("gate_bias") == "$b_{if} + b_{hf}$"
    figure = figures_of("lstm")["carousel"]
    every = [line for ax in all_axes(figure) for line in curves(ax) if "|dc_T/dc_t|" in line.get_gid()]
    labels = [text for text, _ in legend_entries(figure)]
    assert len(every) == 3
    for line in every:
        bias = float(line.get_gid().split("gate_bias=")[1])
        (label,) = [text for text in labels if text.startswith(f"{table.label('gate_bias')} = {bias:g}:")]
        rho = float(label.rsplit("= ", 1)[1])
        ys = line.get_ydata()
        assert (rho > 1) == (ys[-1] > ys[0] > 0), (bias, rho)
    assert any(line.get_ydata()[-1] > 10 for line in every)  # the growth it explains (radius 0.5, bias 5)


def test_gru_has_a_radius_where_its_gradient_grows():
    """GRU's step is about z I + (1 - z) r W near zero input: 0.5 to 1.5 all vanish, so the default adds a radius."""
    analysis = analysis_of("gru")
    assert analysis.radii[:3] == (0.5, 1.0, 1.5) and len(analysis.radii) == 4
    figure = figures_of("gru")["gradient_norms"]
    grads = {
        line.get_gid(): line.get_ydata() for ax in all_axes(figure) for line in curves(ax) if "dL_T" in line.get_gid()
    }
    grows = [gid for gid, ys in grads.items() if ys[-1] > 10 * ys[0] and ys[-1] > 1]
    vanishes = [gid for gid, ys in grads.items() if ys[-1] < ys[0] / 10]
    assert grows == [f"gradient_norms\tT-t\t|dL_T/dh_t|\tradius={analysis.radii[3]!r}"] and len(vanishes) == 3


def test_the_threshold_has_one_name(capsys, tmp_path):
    """g_max in clip_grads, the notebook, the command line and its output, the tables, the plots and the
    documents; theta (the documents' parameters) nowhere."""
    for runtime in (runtime_numpy, runtime_torch, runtime_jax):
        assert list(inspect.signature(runtime.clip_grads).parameters) == ["grads", "g_max"]
    assert "g_max" in inspect.signature(notebook.analyze).parameters
    assert cli.main(["analyze", "linear", "--steps", "3", "--g-max", "7"]) == 0
    out = capsys.readouterr().out
    assert "at g_max = 7" in out and "theta" not in out
    view = notebook.analyze("linear", steps=3, g_max=7)
    table = view.table("clipping")
    assert table.columns[-1] == "g_max" and set(table.column("g_max")) == {7.0} and view.analysis.g_max == 7.0
    legend = [text for text, _ in legend_entries(view.figures()["clipping"])]
    assert r"threshold $g_{\max}$ = 7" in legend and not any("theta" in text for text in legend)
    assert r"g_{\max}" in document(load("linear"), "tex")
