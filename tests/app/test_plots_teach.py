"""The plots say what they show: titles in words, axis labels and legends in mathtext (rendered, so a bad label
fails here), a legend entry for every colour, line style and marker drawn, every bound labelled as an upper bound
and drawn over the curves it bounds, and a loose bound said to be loose."""

import matplotlib.colors
import numpy as np
import pytest

from bptt.app.analysis import plots
from bptt.app.analysis.analyze import analyze
from bptt.app.analysis.table import symbol
from bptt.derive.models import load


@pytest.fixture(scope="module", params=["elman", "lstm"])
def drawn(request):
    """(analysis, {table name: Figure}) of a short run, every figure rendered once."""
    analysis = analyze(load(request.param), 10)
    figures = plots.figures(analysis)
    for figure in figures.values():
        assert plots.png(figure).startswith(b"\x89PNG")  # renders every mathtext label
    return analysis, figures


def legend_entries(ax):
    """[(text, handle)] of every legend of the axes (and of a twin axes sharing its x axis)."""
    found = []
    for axes in [ax, *ax.get_shared_x_axes().get_siblings(ax)]:
        for legend in [*(a for a in axes.artists if hasattr(a, "legend_handles")), axes.get_legend()]:
            if legend is not None:
                found += [(t.get_text(), h) for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)]
    return list(dict.fromkeys(found))


def gid_artists(figure):
    return [artist for artist in figure.findobj(lambda a: bool(a.get_gid()))]


def test_titles_are_words_and_labels_mathtext(drawn):
    analysis, figures = drawn
    for table in analysis.tables:
        (ax, *_) = figures[table.name].axes
        title = ax.get_title()
        assert title and "_" not in title and "(" not in title and title[0].isupper(), title
        assert ax.get_xlabel() in table.labels, ax.get_xlabel()  # mathtext, or words ("spectral radius")
        for label in table.labels:
            assert label.count("$") % 2 == 0, label


def test_the_clipping_threshold_is_the_documents_g_max(drawn):
    """The documents write g_max for the clipping threshold (theta is the parameters there); so does the plot."""
    _, figures = drawn
    texts = [text for text, _ in legend_entries(figures["clipping"].axes[0])]
    assert "threshold $g_{\\max}$ = 1" in texts and not any("theta" in text for text in texts), texts


def test_every_colour_and_line_style_drawn_has_a_legend_entry(drawn):
    """A curve's colour is named in one legend and its line style in the other (the eigenvalues: markers)."""
    analysis, figures = drawn
    for name in ("gradient_norms", "carousel"):
        if name not in figures:
            continue
        ax = figures[name].axes[0]
        entries = legend_entries(ax)
        colours = {matplotlib.colors.to_hex(h.get_color()) for _, h in entries if h.get_color() != "black"}
        styles = {(h.get_linestyle(), h.get_marker()) for _, h in entries if h.get_color() == "black"}
        curves = [line for line in ax.get_lines() if line.get_gid()]
        groups = analysis.radii if name == "gradient_norms" else set(analysis.table(name).column("gate_bias"))
        assert len(curves) >= 6 and len(colours) == len(groups) == 3
        for line in curves:
            assert matplotlib.colors.to_hex(line.get_color()) in colours, line.get_gid()
            assert (line.get_linestyle(), line.get_marker()) in styles, line.get_gid()
        table = analysis.table(name)
        texts = {text for text, _ in entries}
        assert {table.label(c) for c in table.columns[2:]} <= texts


def test_the_eigenvalue_markers_are_explained(drawn):
    analysis, figures = drawn
    table = analysis.table("eigenvalues")
    texts = {text for text, _ in legend_entries(figures["eigenvalues"].axes[0])}
    matrices = dict.fromkeys(table.column("matrix"))
    assert {f"eigenvalues of ${symbol(m)}$" for m in matrices} | {"unit circle"} <= texts
    assert {f"spectral radius {r:g}" for r in analysis.radii} <= texts
    markers = {artist.get_gid().split("matrix=")[1]: artist for artist in gid_artists(figures["eigenvalues"])}
    assert set(markers) == {repr(m) for m in matrices}


def test_every_bound_is_an_upper_bound_drawn_on_top(drawn):
    analysis, figures = drawn
    for name in ("gradient_norms", "alignment"):
        table = analysis.table(name)
        if "upper_bound" not in table.columns:
            continue
        assert table.label("upper_bound").startswith("upper bound ")
        lines = [a for a in gid_artists(figures[name]) if hasattr(a, "get_xdata")]
        bounds = [line for line in lines if line.get_gid().split("\t")[2] == "upper_bound"]
        others = [line for line in lines if line not in bounds]
        assert bounds and min(b.get_zorder() for b in bounds) > max(o.get_zorder() for o in others)
        assert all(b.get_marker() == "v" for b in bounds)  # markers keep a bound visible over a curve it meets


def test_a_loose_bound_says_so_with_its_numbers(drawn):
    analysis, figures = drawn
    table = analysis.table("gradient_norms")
    notes = [text.get_text() for text in figures["gradient_norms"].axes[0].texts]
    if "upper_bound" not in table.columns:
        assert notes == []
        return
    rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    top = max(rows, key=lambda row: (row["upper_bound"], row["T-t"]))
    assert top["upper_bound"] > 10 * top["|dh_T/dh_t|"]
    assert notes == [f"an upper bound, loose:\n{top['upper_bound']:.2g}, measured {top['|dh_T/dh_t|']:.2g}"]


def test_the_linear_bound_at_radius_one_stays_visible():
    """It runs along the product at radius 1.5 (the README's plot): it is drawn over it, with its markers."""
    analysis = analyze(load("linear"), 40)
    figure = plots.figures(analysis)["gradient_norms"]
    lines = {line.get_gid(): line for line in figure.axes[0].get_lines() if line.get_gid()}
    bound = lines["gradient_norms\tT-t\tupper_bound\tradius=1.0"]
    product = lines["gradient_norms\tT-t\t|dh_T/dh_t|\tradius=1.5"]
    close = np.abs(np.log(bound.get_ydata()) - np.log(product.get_ydata())) < np.log(2)
    assert close.sum() > 20  # the curves meet (within a factor 2) over most of the plot
    assert bound.get_zorder() > product.get_zorder() and bound.get_marker() == "v"
