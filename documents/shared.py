"""A figure's parameters, drawn once above the steps (as d2l's figure 9.7.2 draws them): a box for each group of
parameters that the same values read (a gate's weights and biases), in one row, and a light dashed arrow from it
to the label of each step that reads them, so that a reader sees why each parameter's gradient is a sum over
the steps."""

from html import escape  # xml.sax.saxutils's imports urllib.request and http.client: 35 ms

from bptt.documents.latex import latex

RAISE = 1.0  # centimetres from the steps' labels up to the row of parameters
GAP = 0.3  # the least room between two boxes of the row
LETTER, SUBSCRIPT, COMMA, PAD = 0.27, 0.15, 0.22, 0.25  # widths in centimetres, at \small
SCALES = {1.0: r"\small", 0.8: r"\scriptsize", 0.64: r"\tiny"}  # the row's sizes against \small, tried in turn
WIDEST = 16.5  # centimetres: the page's text is 17 wide
ABOVE = 0.7  # centimetres between the rows of a row wrapped
FILL, SVG_FILL, LINE, SVG_LINE = "yellow!12", "#fdf8dc", "black!35", "#aaa"
PICTURE_STYLES = (
    r" p/.style={draw=black!45, fill=" + FILL + r", inner sep=2pt, minimum height=0.5cm},"
    r" pw/.style={->, " + LINE + r", densely dashed},"
)


def placed(shared, left, right, top):
    """({group: (x, y) of its box's centre}, scale): the row centred above the steps (from left to right) at height
    top + RAISE, at the largest of SCALES that keeps it within the steps' width or the page's; a row too wide even
    then is wrapped, its later rows above."""
    room = max(right - left, WIDEST)
    scale = next((scale for scale in SCALES if _row_width(shared, scale) <= room), min(SCALES))
    rows, row = [], []
    for group in shared:
        if row and _row_width((*row, group), scale) > room:
            rows.append(row)
            row = []
        row.append(group)
    rows.append(row)
    places = {}
    for n, row in enumerate(rows):
        x = (left + right - _row_width(row, scale)) / 2
        for group in row:
            half = width(group, scale) / 2
            places[group] = (round(x + half, 3), round(top + RAISE + n * ABOVE, 3))
            x += 2 * half + GAP
    return places, scale


def width(group, scale=1.0):
    """The width of a group's box, in centimetres (an estimate of TeX's)."""
    letters = sum(len(base) * LETTER + len(sub) * SUBSCRIPT for base, sub in map(_parts, group.params))
    return scale * (letters + COMMA * (len(group.params) - 1) + PAD)


def _row_width(shared, scale):
    return sum(width(group, scale) for group in shared) + GAP * max(0, len(shared) - 1)


def _parts(param):
    base, _, sub = str(param).partition("_")
    return base, sub


def tikz_lines(shared, places, scale, column_ids):
    """The TikZ lines of the row and its arrows; column_ids: {step: the TikZ name of its label}."""
    size = SCALES[scale]
    lines = []
    for n, group in enumerate(shared):
        x, y = places[group]
        label = ", ".join(latex(param) for param in group.params)
        lines.append(rf"\node[p, font={size}] (p{n}) at ({x:.3f},{y:.3f}) {{${label}$}};")
        lines += [rf"\draw[pw] (p{n}.south) -- ({column_ids[step]});" for step in group.steps if step in column_ids]
    return lines


def svg_lines(shared, places, scale, columns, point):
    """The SVG elements of the row and its arrows; columns: {step: (x, y) of its label's centre, in centimetres};
    point(x, y): the SVG coordinates of a point."""
    out, size = [], round(13 * scale)
    for group in shared:
        x, y = places[group]
        half_w, half_h = width(group, scale) / 2, 0.25
        for step in group.steps:
            if step in columns:
                (x0, y0), (x1, y1) = point(x, y - half_h), point(columns[step][0], columns[step][1] + 0.2)
                out.append(
                    f'<path d="M{x0:.1f},{y0:.1f} L{x1:.1f},{y1:.1f}" fill="none" stroke="{SVG_LINE}" '
                    'stroke-dasharray="3,2" marker-end="url(#f)"/>'
                )
        (left, top), (right, bottom) = point(x - half_w, y + half_h), point(x + half_w, y - half_h)
        out.append(
            f'<rect class="parameters" x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}" '
            f'height="{bottom - top:.1f}" fill="{SVG_FILL}" stroke="#999"/>'
        )
        parts = '<tspan dy="-3">, </tspan>'.join(
            f'<tspan font-weight="bold">{escape(base, quote=False)}</tspan>'
            f'<tspan font-size="{size - 4}" dy="3">{escape(sub, quote=False)}'
            "</tspan>"
            for base, sub in map(_parts, group.params)
        )
        cx, cy = point(x, y)
        out.append(f'<text x="{cx:.1f}" y="{cy + 4:.1f}" text-anchor="middle" font-size="{size}">{parts}</text>')
    return out
