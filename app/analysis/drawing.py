"""One plot per table of an Analysis, drawn on a matplotlib Figure (or SubFigure) in one or more panels: a title in
words over the regime of its runs, the columns' mathtext labels, one legend below the panels (covering no curve)
with an entry for every colour, line style and marker.

Each plotted artist carries a gid naming the table's columns it shows, `table<TAB>x<TAB>y<TAB>column=value;...`
(the rows it takes: all when no condition is given), so that the data behind a plot can be read back and
compared with the printed table.
"""

import numpy as np

from bptt.app.analysis.table import symbol

STYLES = ("-", "--", "-.", (0, (5, 1, 1, 1, 1, 1)))  # the measured columns of a plot, in order
BOUND = dict(linestyle=":", linewidth=2.2, marker="v", markevery=5, markersize=5, zorder=3)  # drawn over the rest
MARKERS = "o^sDv<>p"


def gid(table, x, y, **where):
    """`table<TAB>x column<TAB>y column<TAB>column=value;...`: tabs, since column names hold '|'."""
    return "\t".join([table.name, x, y, ";".join(f"{column}={value!r}" for column, value in where.items())])


def _rows_where(table, column, value):
    index = table.columns.index(column)
    return [row for row in table.rows if row[index] == value]


def _series(table, rows, x, y):
    return [row[table.columns.index(x)] for row in rows], [row[table.columns.index(y)] for row in rows]


def _values(table, column):
    return list(dict.fromkeys(table.column(column)))


def _legend(figure, handles, columns=3):
    """One legend below the figure's panels, outside every axes, so that it covers no curve."""
    figure.legend(handles=handles, loc="outside lower center", ncols=columns, fontsize="x-small")


def _title(figure, words, table):
    """What the plot shows, over the regime of its runs."""
    figure.suptitle(f"{words}\n{table.regime}", fontsize="medium")


def _handle(ax, label, **style):
    """A legend entry that draws nothing on the axes."""
    (line,) = ax.plot([], [], label=label, **style)
    return line


def draw_norms(figure, table):
    """A column of panels per radius: above, the gradient against T - t; below, the Jacobian products and the
    upper bound over them (a gradient tracks the product it is made of, so on one axes it would hide it). A colour
    and line style per column; the panels share their axes, so that the radii compare."""
    gradient, *products = [c for c in table.columns if c not in ("radius", "T-t", "upper_bound")]
    rows = [[gradient], products + [c for c in ("upper_bound",) if c in table.columns]]
    radii = _values(table, "radius")
    axes = figure.subplots(2, len(radii), sharex=True, sharey=True, squeeze=False)
    styles = {c: dict(color=f"C{n}", linestyle=STYLES[n % 4]) for n, c in enumerate([gradient, *products])}
    styles["upper_bound"] = dict(color="black", **BOUND)
    for n, radius in enumerate(radii):
        for ax, columns in zip(axes[:, n], rows, strict=True):
            for column in columns:
                xs, ys = _series(table, _rows_where(table, "radius", radius), "T-t", column)
                ax.plot(xs, ys, gid=gid(table, "T-t", column, radius=radius), **styles[column])
            ax.set(yscale="log")
        axes[0, n].set_title(f"spectral radius {radius:g}")
        axes[1, n].set_xlabel(table.label("T-t"))
    axes[0, 0].set_ylabel("gradient norm")
    axes[1, 0].set_ylabel("Jacobian norm")
    handles = [_handle(axes[0, 0], table.label(c), **styles[c]) for c in [gradient, *rows[1]]]
    if "upper_bound" in table.columns:
        _loose(axes[1, radii.index(max(radii))], table, products[-1])
    _title(figure, "Gradient flow back from the last step", table)
    _legend(figure, handles, 2)


def _loose(ax, table, measured):
    """A note in the panel's lower right corner, pointing at the far end of the largest bound: how far above the
    measured norm it is."""
    row = max(table.rows, key=lambda r: (r[table.columns.index("upper_bound")], r[1]))
    bound, found = row[table.columns.index("upper_bound")], row[table.columns.index(measured)]
    if bound > 10 * found:
        ax.annotate(
            f"an upper bound, loose:\n{bound:.2g}, measured {found:.2g}",
            (row[1], bound),
            xytext=(0.97, 0.04),
            textcoords="axes fraction",
            ha="right",
            va="bottom",
            fontsize="x-small",
            arrowprops=dict(arrowstyle="->", color="grey", linewidth=0.8),
        )


def draw_eigenvalues(figure, table):
    """A panel per recurrent matrix: its eigenvalues in the complex plane, a colour per radius, and the unit
    circle."""
    angles = np.linspace(0, 2 * np.pi, 361)
    matrices = _values(table, "matrix")
    axes = figure.subplots(1, len(matrices), sharex=True, sharey=True, squeeze=False).ravel()
    for m, (ax, matrix) in enumerate(zip(axes, matrices, strict=True)):
        circle = ax.plot(np.cos(angles), np.sin(angles), color="grey", linewidth=0.8, label="unit circle")[0]
        for n, radius in enumerate(_values(table, "radius")):
            rows = [row for row in _rows_where(table, "radius", radius) if row[1] == matrix]
            xs, ys = _series(table, rows, "re", "im")
            ax.scatter(
                xs,
                ys,
                color=f"C{n}",
                marker=MARKERS[m % 8],
                s=18,
                gid=gid(table, "re", "im", radius=radius, matrix=matrix),
            )
        ax.set(aspect="equal", adjustable="box", xlabel=table.label("re"), title=f"${symbol(matrix)}$")
    axes[0].set_ylabel(table.label("im"))
    colours = [
        _handle(axes[0], f"spectral radius {radius:g}", color=f"C{n}", marker="o", linestyle="")
        for n, radius in enumerate(_values(table, "radius"))
    ]
    _title(figure, "Eigenvalues of each recurrent matrix", table)
    _legend(figure, [*colours, circle], len(colours) + 1)


def draw_alignment(figure, table):
    """|cos(M^k x, v1)| against k, and on a log axis the tangent of the angle under its upper bound."""
    ax = figure.subplots()
    xs, ys = _series(table, table.rows, "k", "cos")
    lines = ax.plot(xs, ys, "-", color="C0", label=table.label("cos"), gid=gid(table, "k", "cos"))
    ax.set(ylim=(0, 1.05), xlabel=table.label("k"), ylabel=table.label("cos"))
    twin = ax.twinx()
    for column, style in (("tan", dict(linestyle="--")), ("upper_bound", BOUND)):
        xs, ys = _series(table, table.rows, "k", column)
        lines += twin.plot(xs, ys, color="C1", label=table.label(column), gid=gid(table, "k", column), **style)
    twin.set(yscale="log", ylabel=table.label("tan"))
    _title(figure, "Powers of a matrix turn a vector toward its top eigenvector", table)
    _legend(figure, lines, 1)


def draw_clipping(figure, table):
    """The gradient's global norm before and after clipping for each radius, with the threshold."""
    ax = figure.subplots()
    positions = range(len(table.rows))
    for offset, column in ((-0.2, "norm"), (0.2, "clipped")):
        heights = table.column(column)
        ax.bar(
            [p + offset for p in positions],
            heights,
            width=0.4,
            label=table.label(column),
            gid=gid(table, "radius", column),
        )
    g_max = table.column("g_max")[0]
    ax.axhline(
        g_max, color="grey", linestyle=":", label=f"{table.label('g_max')} = {g_max:.3g}", gid=gid(table, "", "g_max")
    )
    ax.set_xticks(list(positions), [f"{r:g}" for r in table.column("radius")])
    ax.set(yscale="log", xlabel=table.label("radius"), ylabel="global gradient norm")
    _title(figure, "Gradient clipping: a norm above the threshold is cut to it, one below is left alone", table)
    _legend(figure, ax.get_legend_handles_labels()[0], 3)


def draw_carousel(figure, table):
    """The carousel's own product (left) and every path's block (right) against T - t, a colour per gate bias, the
    step Jacobian's spectral radius beside each bias: every path grows where it is above 1."""
    measured = [c for c in table.columns if c not in ("gate_bias", "T-t", "step_radius")]
    axes = figure.subplots(1, len(measured), sharex=True, sharey=True, squeeze=False).ravel()
    colours = []
    for n, bias in enumerate(_values(table, "gate_bias")):
        rows = _rows_where(table, "gate_bias", bias)
        for ax, column in zip(axes, measured, strict=True):
            xs, ys = _series(table, rows, "T-t", column)
            ax.plot(xs, ys, color=f"C{n}", gid=gid(table, "T-t", column, gate_bias=bias))
        step = rows[0][table.columns.index("step_radius")]
        label = f"{table.label('gate_bias')} = {bias:g}: {table.label('step_radius')} = {step:.3g}"
        colours.append(_handle(axes[0], label, color=f"C{n}"))
    for ax, column in zip(axes, measured, strict=True):
        ax.set(yscale="log", xlabel=table.label("T-t"))
        ax.set_title(table.label(column), fontsize="small")
    axes[0].set_ylabel("norm")
    _title(figure, "The constant error carousel", table)
    _legend(figure, colours, 1)


def decades_only(figure):
    """A log axis over more than three decades marks its decades alone: there its eight minor ticks to a decade
    stand too close to read, and drawing them took most of a plot's time."""
    for ax in figure.axes:
        low, high = ax.get_ylim()
        if ax.get_yscale() == "log" and high > 1e3 * low:
            ax.yaxis.minorticks_off()


def draw(figure, table):
    """The plot of a table on a Figure or SubFigure."""
    DRAW[table.name](figure, table)
    decades_only(figure)


DRAW = {
    "gradient_norms": draw_norms,
    "gradient_norms_saturated": draw_norms,
    "eigenvalues": draw_eigenvalues,
    "alignment": draw_alignment,
    "clipping": draw_clipping,
    "carousel": draw_carousel,
}
