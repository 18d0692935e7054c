"""How each edge of a figure is drawn: a straight line where it runs clear of every box but its ends, else a
curve bent by the least angle that clears them; a backward edge bent to its left, further where a forward
edge joins the same two nodes, so that the two arrows stand apart. A curve is a cubic Bézier given by its
control points, as TikZ's `bend left=` places them, and checked at points sampled along it. An edge no such
curve clears (and a forward edge between steps whose straight line does not) takes a detour of straight runs
through the corridors between the boxes (documents/detour.py), and the gaps between levels that detours run
along are made higher (widened)."""

import functools
import itertools
import math
from collections import defaultdict
from dataclasses import replace

from bptt.documents.detour import Corridors

BENDS = (22, 35, 50, -22, -35, -50)  # degrees left of the direction of travel, tried in turn
LOOSENESS = 0.3915  # TikZ's default: each control point this fraction of the chord from its end
WIDER = (1.0, 1.4)  # looseness multiples tried after every bend at the one before failed
BACK_BENDS = (22, 35, 50, 65, 80, -22, -35, -50, -65, -80)  # those of a backward edge
BACK_WIDER = (1.0, 1.8, 2.8, 4.0)
CLEARANCE = 0.15  # centimetres between a backward curve's middle and its forward twin
SAMPLES = 40
SPACING = 0.04  # centimetres
LOOK = 8  # a curve is first checked at every LOOK-th sampled point: most crossings show there, at an eighth the cost
ROOM = 0.25  # centimetres added to a gap between two levels for each source whose detours run along it
MOST_ROOM = 0.5  # and at most this much to one gap


class Corners(tuple):
    """A route of straight runs between these points (the centres of its nodes at its ends), drawn with rounded
    corners (documents/detour.py)."""


@functools.lru_cache(maxsize=8)  # a figure is drawn twice, as TikZ and as SVG
def routes(graph, box):
    """{edge: its four control points, None for a straight line, or Corners}; box(node) its half width and height.
    Past the first, a curve is tried only if its control points stay inside the nodes' frame: TikZ counts them in
    the picture's width. An edge no curve draws clear of the boxes takes a detour through the corridors."""
    boxes = {node.key: (node.x, node.y, *box(node)) for node in graph.nodes}
    frame = _frame(boxes.values())
    drawn, points, taken, corridors = {}, {}, {}, None
    for edge in sorted(graph.edges, key=lambda e: e.backward):  # forward first: the backward ones avoid them
        twin = points.get((edge.target, edge.source)) if edge.backward else None
        twin = None if twin is None else _visible(twin, boxes, edge) or twin
        first = None
        for n, curve in enumerate(_candidates(graph.node(edge.source), graph.node(edge.target), edge.backward)):
            if n and not all(inside(point, frame) for point in curve[1:3]):
                continue
            if first and _crossed(sampled_points(curve, LOOK), edge, boxes):
                continue  # a point of every LOOK-th crosses a box: so do all of them, which need not be sampled
            sampled = sampled_points(curve)
            first = first or (curve, sampled)
            if not _crossed(sampled, edge, boxes) and (twin is None or _apart(sampled, twin, boxes, edge)):
                drawn[edge] = None if curve[1] == curve[0] else curve
                break
        else:
            corridors = corridors or Corridors(boxes, frame)
            corners = corridors.route(edge.source, edge.target, taken)
            curve, sampled = first if corners is None else (corners, run_points(corners))
            drawn[edge] = curve if corners is None else Corners(corners)
        if not edge.backward:
            points[(edge.source, edge.target)] = sampled
    return drawn


def widened(graph, box):
    """The graph with each gap between two levels that detours run along made ROOM higher for each source whose
    detours run there into one step, at most MOST_ROOM: the lines of two sources in one corridor stand apart, and
    the arrows leaving them show."""
    levels = sorted({node.y for node in graph.nodes})
    sources = defaultdict(set)  # {(level, step): the sources of the detours running above that level into that step}
    for edge, route in routes(graph, box).items():
        if isinstance(route, Corners):
            for (_, y0), (_, y1) in itertools.pairwise(route):
                if y0 == y1 and y0 not in levels and y0 > levels[0]:
                    sources[(max(level for level in levels if level < y0), edge.target[1])].add(edge.source)
    room = defaultdict(float)
    for (level, _), found in sources.items():
        room[level] = min(MOST_ROOM, max(room[level], ROOM * len(found)))
    if not room:
        return graph

    def lifted(y):
        return round(y + sum(extra for level, extra in room.items() if level < y), 3)

    return replace(graph, nodes=tuple(replace(node, y=lifted(node.y)) for node in graph.nodes))


def _candidates(source, target, backward):
    """The curves tried for an edge, in order: straight (a forward edge), bent by each of BENDS, each looser; a
    backward edge also by the steeper BACK_BENDS, looser still (an arc over a step's rows reads as the recursion).
    A forward edge between steps is straight or takes a detour: a curve threading the gates of a step reads badly."""
    if not backward and source.step != target.step:
        yield controls(source, target, 0)
        return
    for wider in BACK_WIDER if backward else WIDER:
        for bend in BACK_BENDS if backward else BENDS if wider > 1 else (0, *BENDS):
            yield controls(source, target, bend, wider)


def _frame(boxes):
    """The box (x, y, half width, half height) around every node's box."""
    boxes = list(boxes)
    low_x, high_x = min(x - w for x, _, w, _ in boxes), max(x + w for x, _, w, _ in boxes)
    low_y, high_y = min(y - h for _, y, _, h in boxes), max(y + h for _, y, _, h in boxes)
    return (low_x + high_x) / 2, (low_y + high_y) / 2, (high_x - low_x) / 2, (high_y - low_y) / 2


def controls(source, target, bend, wider=1.0):
    """The four control points of a cubic from source's centre to target's, bent `bend` degrees to the left of
    its direction (a straight line for 0), the control points `wider` times TikZ's default looseness out."""
    start, end = (source.x, source.y), (target.x, target.y)
    if bend == 0:
        return start, start, end, end
    dx, dy = end[0] - start[0], end[1] - start[1]
    reach, heading, turn = wider * LOOSENESS * math.hypot(dx, dy), math.atan2(dy, dx), math.radians(bend)
    out, back = heading + turn, heading + math.pi - turn
    first = (start[0] + reach * math.cos(out), start[1] + reach * math.sin(out))
    second = (end[0] + reach * math.cos(back), end[1] + reach * math.sin(back))
    return start, first, second, end


def sampled_points(curve, every=1):
    """Points along a cubic, at least SAMPLES + 1 and at most SPACING apart along its control polygon: a list
    of (x, y), each point_at(curve, k / count) (the same sums, term by term); with every=n, only each n-th."""
    count = max(SAMPLES, math.ceil(sum(math.dist(p, q) for p, q in itertools.pairwise(curve)) / SPACING))
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = curve
    weights = _weights(count) if every == 1 else _weights(count)[::every]
    return [(a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3) for a, b, c, d in weights]


@functools.cache
def _weights(count):
    """point_at's four weights at s = k / count for k = 0..count."""
    return tuple(_weights_at(k / count) for k in range(count + 1))


def _weights_at(s):
    return (1 - s) ** 3, 3 * (1 - s) ** 2 * s, 3 * (1 - s) * s**2, s**3


def run_points(corners, spacing=0.05):
    """Points along a route of straight runs, at most `spacing` apart."""
    found = [corners[0]]
    for (x0, y0), (x1, y1) in zip(corners, corners[1:], strict=False):
        count = max(1, math.ceil(math.hypot(x1 - x0, y1 - y0) / spacing))
        found += [(x0 + (x1 - x0) * k / count, y0 + (y1 - y0) * k / count) for k in range(1, count + 1)]
    return found


def point_at(curve, s):
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = curve
    a, b, c, d = _weights_at(s)
    return a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3


def inside(point, node_box, margin=0.0):
    """Whether a point lies in a box (x, y, half width, half height) grown by margin."""
    x, y, half_w, half_h = node_box
    return abs(point[0] - x) < half_w + margin and abs(point[1] - y) < half_h + margin


def _crossed(points, edge, boxes):
    """Whether a path runs through (or within 0.03 cm of) a box other than its ends' (boxes: {key: (x, y, half
    width, half height)}), as inside(point, box, 0.03) says of some point and box; only the boxes near the path are
    tested point by point."""
    xs, ys = zip(*points, strict=True)
    low_x, high_x, low_y, high_y = min(xs) - 0.03, max(xs) + 0.03, min(ys) - 0.03, max(ys) + 0.03
    ends = (edge.source, edge.target)
    for key, (x, y, half_w, half_h) in boxes.items():
        if x + half_w > low_x and x - half_w < high_x and y + half_h > low_y and y - half_h < high_y:
            reach_x, reach_y = half_w + 0.03, half_h + 0.03
            if key not in ends and any(abs(px - x) < reach_x and abs(py - y) < reach_y for px, py in points):
                return True
    return False


def _visible(points, boxes, edge):
    """The points outside the boxes of an edge's ends."""
    ends = boxes[edge.source], boxes[edge.target]
    return [p for p in points if not inside(p, ends[0]) and not inside(p, ends[1])]


def _apart(points, twin, boxes, edge):
    """Whether some visible point of a path lies CLEARANCE or further from every point of twin (its forward
    twin's visible points, or all of them if none is visible): max over p of min over q of |p - q| >= CLEARANCE.
    A point near the twin is found by scanning from where the point before it found one, so that a path hugging
    its twin costs a few distances a point."""
    hint = 0
    for p in _visible(points, boxes, edge):
        hint = _near(p, twin, hint)
        if hint is None:
            return True
    return False


def _near(point, others, start):
    """The index of a point of others closer than CLEARANCE to point, sought from start on (then before it), or
    None."""
    for k in itertools.chain(range(start, len(others)), range(start)):
        if math.dist(point, others[k]) < CLEARANCE:
            return k
    return None
