"""One plot per table of an Analysis, drawn on a matplotlib Axes: titles in words, the columns' mathtext labels,
a legend entry for every colour, line style and marker.

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


def _two_legends(ax, colours, styles, places=("upper left", "lower left")):
    """A legend of the colours (what each colour is) and beside it one of the line styles (what each line is)."""
    ax.add_artist(ax.legend(handles=colours, fontsize="x-small", loc=places[0]))
    ax.legend(handles=styles, fontsize="x-small", loc=places[1])


def _handle(ax, label, **style):
    """A legend entry that draws nothing on the axes."""
    (line,) = ax.plot([], [], label=label, **style)
    return line


def _curves(ax, table, group, columns):
    """Each column against T - t, a colour per value of the group column; the (colour, style) legend handles."""
    colours, styles = [], []
    for n, value in enumerate(_values(table, group)):
        rows = _rows_where(table, group, value)
        for column, style in zip(columns, STYLES, strict=False):
            xs, ys = _series(table, rows, "T-t", column)
            ax.plot(xs, ys, linestyle=style, color=f"C{n}", gid=gid(table, "T-t", column, **{group: value}))
        colours.append(_handle(ax, f"{table.label(group)} = {value:g}", color=f"C{n}"))
    for column, style in zip(columns, STYLES, strict=False):
        styles.append(_handle(ax, table.label(column), color="black", linestyle=style))
    return colours, styles


def draw_norms(ax, table):
    """The gradient and the Jacobian products against T - t, a colour per radius, and the upper bound over them."""
    measured = [c for c in table.columns if c not in ("radius", "T-t", "upper_bound")]
    colours, styles = _curves(ax, table, "radius", measured)
    if "upper_bound" in table.columns:
        for n, radius in enumerate(_values(table, "radius")):
            xs, ys = _series(table, _rows_where(table, "radius", radius), "T-t", "upper_bound")
            ax.plot(xs, ys, color=f"C{n}", gid=gid(table, "T-t", "upper_bound", radius=radius), **BOUND)
        styles.append(_handle(ax, table.label("upper_bound"), color="black", **BOUND))
        _loose(ax, table, measured[-1])
    ax.set(yscale="log", xlabel=table.label("T-t"), ylabel="norm", title="Gradient flow back from the last step")
    _two_legends(ax, colours, styles)


def _loose(ax, table, measured):
    """A note at the far end of the largest bound: how far above the measured norm it is."""
    row = max(table.rows, key=lambda r: (r[table.columns.index("upper_bound")], r[1]))
    bound, found = row[table.columns.index("upper_bound")], row[table.columns.index(measured)]
    if bound > 10 * found:
        ax.annotate(
            f"an upper bound, loose:\n{bound:.2g}, measured {found:.2g}",
            (row[1], bound),
            xytext=(-6, -4),
            textcoords="offset points",
            ha="right",
            va="top",
            fontsize="x-small",
        )


def draw_eigenvalues(ax, table):
    """The eigenvalues in the complex plane, a colour per radius, a marker per matrix, and the unit circle."""
    angles = np.linspace(0, 2 * np.pi, 361)
    circle = ax.plot(np.cos(angles), np.sin(angles), color="grey", linewidth=0.8, label="unit circle")[0]
    matrices = _values(table, "matrix")
    colours = []
    for n, radius in enumerate(_values(table, "radius")):
        for m, matrix in enumerate(matrices):
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
        colours.append(_handle(ax, f"spectral radius {radius:g}", color=f"C{n}", marker="o", linestyle=""))
    markers = [
        _handle(ax, f"eigenvalues of ${symbol(matrix)}$", color="grey", marker=MARKERS[m % 8], linestyle="")
        for m, matrix in enumerate(matrices)
    ]
    ax.set(aspect="equal", adjustable="datalim", xlabel=table.label("re"), ylabel=table.label("im"))
    ax.set_title("Eigenvalues of the recurrent matrices")
    _two_legends(ax, colours, [*markers, circle], ("upper left", "upper right"))


def draw_alignment(ax, table):
    """|cos(M^k x, v1)| against k, and on a log axis the tangent of the angle under its upper bound."""
    xs, ys = _series(table, table.rows, "k", "cos")
    lines = ax.plot(xs, ys, "-", color="C0", label=table.label("cos"), gid=gid(table, "k", "cos"))
    ax.set(ylim=(0, 1.05), xlabel=table.label("k"), ylabel=table.label("cos"))
    ax.set_title("Powers of a matrix turn a vector toward its top eigenvector")
    twin = ax.twinx()
    for column, style in (("tan", dict(linestyle="--")), ("upper_bound", BOUND)):
        xs, ys = _series(table, table.rows, "k", column)
        lines += twin.plot(xs, ys, color="C1", label=table.label(column), gid=gid(table, "k", column), **style)
    twin.set(yscale="log", ylabel=table.label("tan"))
    ax.legend(handles=lines, loc="best", fontsize="x-small")


def draw_clipping(ax, table):
    """The gradient's global norm before and after clipping for each radius, with the threshold."""
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
    theta = table.column("theta")[0]
    ax.axhline(
        theta, color="grey", linestyle=":", label=f"{table.label('theta')} = {theta:g}", gid=gid(table, "", "theta")
    )
    ax.set_xticks(list(positions), [f"{r:g}" for r in table.column("radius")])
    ax.set(yscale="log", xlabel=table.label("radius"), ylabel="global gradient norm", title="Gradient clipping")
    ax.legend(fontsize="x-small")


def draw_carousel(ax, table):
    """The carousel's own product and every path's Jacobian against T - t, a colour per gate bias."""
    measured = [c for c in table.columns if c not in ("gate_bias", "T-t")]
    colours, styles = _curves(ax, table, "gate_bias", measured)
    ax.set(yscale="log", xlabel=table.label("T-t"), ylabel="norm", title="The constant error carousel")
    _two_legends(ax, colours, styles)


DRAW = {
    "gradient_norms": draw_norms,
    "eigenvalues": draw_eigenvalues,
    "alignment": draw_alignment,
    "clipping": draw_clipping,
    "carousel": draw_carousel,
}
