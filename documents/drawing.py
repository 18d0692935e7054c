"""A Graph drawn: as a TikZ picture for LaTeX, and as SVG for Markdown and notebooks, from the same
coordinates and the same curves (documents/routing.py: around the boxes, a backward arrow clear of its forward
twin). Forward edges are grey, the backward edges of the adjoint recursion red, the edges a truncation cuts
dashed."""

from html import escape  # xml.sax.saxutils's imports urllib.request and http.client: 35 ms

from sympy.printing.latex import greek_letters_set

from bptt.derive.nodes import SeqAt
from bptt.documents.graph import LOSS, STEPS
from bptt.documents.latex import latex
from bptt.documents.latex_names import accented
from bptt.documents.routing import Corners, controls, inside, point_at, routes
from bptt.documents.shared import PICTURE_STYLES, placed, svg_lines, tikz_lines

FILL = {
    "input": "black!8",
    "label": "black!8",
    "target": "black!8",
    "state": "blue!14",
    "output": "green!14",
    LOSS: "orange!22",
}
SVG_FILL = {
    "input": "#ececec",
    "label": "#ececec",
    "target": "#ececec",
    "state": "#dce3f7",
    "output": "#dcf2dc",
    LOSS: "#fbe3c8",
}
BACK = "red!75!black"
SVG_BACK = "#b22222"
SCALE = 34  # SVG pixels per centimetre
GREEK = {
    name: chr(code)
    for name, code in zip(
        (
            "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu "
            "nu xi omicron pi rho sigma tau upsilon phi chi psi omega"
        ).split(),
        [*range(0x3B1, 0x3C2), *range(0x3C3, 0x3CA)],
        strict=True,
    )
}


def tex_label(node):
    if node.name == LOSS:
        return rf"$\ell_{{{node.step}}}$"
    return f"${latex(SeqAt(node.name, node.step, 1, node.role))}$"


def tikz(graph):
    """The graph as a tikzpicture (TikZ only, no library): square boxes, as d2l draws them (rounded corners
    took pdflatex half of a node's time)."""
    ids = {node.key: f"n{n}" for n, node in enumerate(graph.nodes)}
    lines = [
        r"\begin{tikzpicture}[x=1cm, y=1cm, >=stealth, font=\small,"
        r" v/.style={draw=black!60, inner sep=2pt, minimum height=0.5cm},"
        r" fw/.style={->, black!55}, bw/.style={->, " + BACK + r", semithick}," + PICTURE_STYLES + "]"
    ]
    top = max(node.y for node in graph.nodes) + 0.8
    for step, x in _columns(graph).items():
        lines.append(rf"\node[black!60] (s{step}) at ({x:.3f},{top:.3f}) {{$t = {step}$}};")
    places, scale = _shared_places(graph, top)
    lines += tikz_lines(graph.shared, places, scale, {step: f"s{step}" for step in _columns(graph)})
    for node in graph.nodes:
        fill = FILL.get(node.role, "white")
        lines.append(rf"\node[v, fill={fill}] ({ids[node.key]}) at ({node.x:.3f},{node.y:.3f}) {{{tex_label(node)}}};")
    for edge, curve in routes(graph, box).items():
        source, target = ids[edge.source], ids[edge.target]
        style = ("bw" if edge.backward else "fw") + ", dashed" * edge.cut
        if curve is None:
            lines.append(rf"\draw[{style}] ({source}) -- ({target});")
            continue
        if isinstance(curve, Corners):
            runs = "".join(f" -- ({x:.3f},{y:.3f})" for x, y in curve[1:-1])
            lines.append(rf"\draw[{style}, rounded corners=4pt] ({source}){runs} -- ({target});")
            continue
        (x1, y1), (x2, y2) = curve[1:3]  # as numbers: TikZ then does no trigonometry, three times faster
        lines.append(
            rf"\draw[{style}] ({source}) .. controls ({x1:.3f},{y1:.3f}) and ({x2:.3f},{y2:.3f}) .. ({target});"
        )
    lines.append(r"\end{tikzpicture}")
    return "\n".join(lines)


def _columns(graph):
    """{step: the x of its column's middle}, step STEPS + 1 holding reverse-time states' initial values."""
    xs = {}
    for node in graph.nodes:
        xs.setdefault(node.step, []).append(node.x)
    return {step: (min(xs[step]) + max(xs[step])) / 2 for step in range(STEPS + 2) if step in xs}


def _shared_places(graph, top):
    """Where the parameters' row stands above the steps' labels (at height top), and its scale."""
    left = min(node.x - box(node)[0] for node in graph.nodes)
    right = max(node.x + box(node)[0] for node in graph.nodes)
    return placed(graph.shared, left, right, top)


def text_label(node):
    """A node's label in Unicode: its letters (Greek names as Greek, an accent as its combining character, a layer
    number as a superscript), bold for a vector, and the step as a subscript."""
    if node.name == LOSS:
        return "ℓ", False, str(node.step)
    name, accent = accented(node.name)
    bar = accent[1] if accent else ""
    base, _, sub = name.partition("_")
    digits = len(base) - len(base.rstrip("0123456789"))
    layer = f"({base[-digits:]})" if digits and digits < len(base) else ""
    base = base[:-digits] if layer else base
    base = GREEK.get(base.lower(), base) if base.lower() in greek_letters_set else base
    subscript = f"{sub},{node.step}" if sub else str(node.step)
    return base + bar + layer.translate(_SUPERSCRIPT), node.role != "label", subscript


_SUPERSCRIPT = str.maketrans("0123456789()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁽⁾")
_RAISED = set("⁰¹²³⁴⁵⁶⁷⁸⁹⁽⁾")


def svg(graph):
    """The graph as an inline SVG element, y pointing down as SVG's does."""
    xs = [node.x for node in graph.nodes]
    ys = [node.y for node in graph.nodes]
    labels = max(ys) + 0.8
    places, scale = _shared_places(graph, labels)
    left, top = min(xs) - 0.8, max([labels + 0.4, *(y + 0.4 for _, y in places.values())])
    width, height = (max(xs) + 0.8 - left) * SCALE, (top - min(ys) + 0.6) * SCALE

    def point(x, y):
        return (x - left) * SCALE, (top - y) * SCALE

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="serif" font-size="13">',
        '<defs><marker id="f" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker>'
        f'<marker id="b" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{SVG_BACK}"/></marker></defs>',
    ]
    columns = _columns(graph)
    for step, x in columns.items():
        px, py = point(x, labels)
        out.append(f'<text x="{px:.1f}" y="{py + 4:.1f}" text-anchor="middle" fill="#777">t = {step}</text>')
    out += svg_lines(graph.shared, places, scale, {step: (x, labels) for step, x in columns.items()}, point)
    for edge, curve in routes(graph, box).items():
        out.append(_svg_edge(edge, graph, curve, point))
    for node in graph.nodes:
        out.append(_svg_node(node, point))
    out.append("</svg>")
    return "\n".join(out)


def box(node):
    """Half the width and half the height of a node's box, in centimetres: a letter 0.22, a superscript's
    character (a layer number) and a subscript's 0.16, and the padding."""
    base, _, subscript = text_label(node)
    letters = base.replace("\u0304", "")
    raised = sum(char in _RAISED for char in letters)
    return ((len(letters) - raised) * 0.22 + (raised + len(subscript)) * 0.16 + 0.25) / 2, 0.25


def _svg_node(node, point):
    base, bold, subscript = text_label(node)
    half_w, half_h = box(node)
    x, y = point(node.x, node.y)
    weight = ' font-weight="bold"' if bold else ""
    return (
        f'<rect x="{x - half_w * SCALE:.1f}" y="{y - half_h * SCALE:.1f}" width="{2 * half_w * SCALE:.1f}" '
        f'height="{2 * half_h * SCALE:.1f}" fill="{SVG_FILL.get(node.role, "white")}" stroke="#888"/>'
        f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle"><tspan{weight}>{escape(base, quote=False)}</tspan>'
        f'<tspan font-size="9" dy="3">{escape(subscript, quote=False)}</tspan></text>'
    )


def _svg_edge(edge, graph, curve, point):
    source, target = graph.node(edge.source), graph.node(edge.target)
    if curve is None:
        curve = controls(source, target, 0)
    ends = [(node.x, node.y, *box(node)) for node in (source, target)]
    if isinstance(curve, Corners):
        (x0, y0), *corners = (point(*p) for p in _visible_runs(curve, *ends))
        path = f"M{x0:.1f},{y0:.1f} " + " ".join(f"L{x:.1f},{y:.1f}" for x, y in corners)
        join = ' stroke-linejoin="round"'
    else:
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = (point(*p) for p in _visible_piece(curve, *ends))
        path, join = f"M{x0:.1f},{y0:.1f} C{x1:.1f},{y1:.1f} {x2:.1f},{y2:.1f} {x3:.1f},{y3:.1f}", ""
    dash = ' stroke-dasharray="5,3"' if edge.cut else ""
    if not edge.backward:
        return f'<path d="{path}" fill="none" stroke="#777" marker-end="url(#f)"{join}{dash}/>'
    return f'<path d="{path}" fill="none" stroke="{SVG_BACK}" stroke-width="1.3" marker-end="url(#b)"{join}{dash}/>'


def _visible_runs(corners, source_box, target_box):
    """The corners of a route of straight runs, its ends moved to where it leaves its source's box and enters its
    target's."""
    return (_border(corners[0], corners[1], source_box), *corners[1:-1], _border(corners[-1], corners[-2], target_box))


def _border(centre, towards, node_box):
    """Where the run from a box's centre towards a point leaves the box."""
    (x, y), (tx, ty), (_, _, half_w, half_h) = centre, towards, node_box
    dx, dy = tx - x, ty - y
    scale = min(half_w / abs(dx) if dx else float("inf"), half_h / abs(dy) if dy else float("inf"), 1.0)
    return x + dx * scale, y + dy * scale


def _visible_piece(curve, source_box, target_box, count=80):
    """The control points of the part of a cubic between where it leaves its source's box and where it enters its
    target's, as TikZ clips a path at its nodes' borders."""
    steps = [k / count for k in range(count + 1)]
    start = next((s for s in steps if not inside(point_at(curve, s), source_box)), 0.0)
    end = next((s for s in reversed(steps) if not inside(point_at(curve, s), target_box)), 1.0)
    return _split(_split(curve, end)[0], start / end if end else 0.0)[1]


def _split(curve, s):
    """A cubic cut at parameter s into two cubics (de Casteljau)."""

    def mix(p, q):
        return p[0] + (q[0] - p[0]) * s, p[1] + (q[1] - p[1]) * s

    a, b, c, d = curve
    ab, bc, cd = mix(a, b), mix(b, c), mix(c, d)
    abc, bcd = mix(ab, bc), mix(bc, cd)
    middle = mix(abc, bcd)
    return (a, ab, abc, middle), (middle, bcd, cd, d)
