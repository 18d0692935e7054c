"""The figures' edges as TikZ draws them, read back from the picture's text: no edge runs through a node box
other than its two ends, and a backward arrow stands clear of the forward arrow between the same two nodes
(issue 29: gru's m_t -> n̄_t crossed r_t; the arrows between h_t and ℓ_t lay on top of each other). A curve
is checked at points sampled along it, not by its chord."""

import math
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from bptt.derive.models import load, names
from bptt.documents.drawing import box, tikz
from bptt.tests.documents.test_graph import USERS, figures, model_of
from bptt.tests.support.cell_plans import build
from bptt.tests.support.cells import plans

SAMPLES = 60
CLEARANCE = 0.12  # centimetres: the least distance of a backward curve's middle from its forward twin
SLACK = 0.02  # a path may graze a box's border by this much (the boxes are estimates)
NODE = re.compile(r"\\node\[v[^]]*\] \(n(\d+)\) at \(([-\d.]+),([-\d.]+)\)")
DRAW = re.compile(
    r"\\draw\[(fw|bw)[^]]*\] \(n(\d+)\) (?:--|\.\. controls \(([-\d.]+),([-\d.]+)\) and \(([-\d.]+),([-\d.]+)\) \.\.) "
    r"\(n(\d+)\);"
)


def drawn(graph):
    """(boxes, paths): each node's box (x, y, half width, half height) by its id, and each edge as
    (backward, source id, target id, points sampled along what TikZ draws)."""
    text = tikz(graph)
    boxes = {}
    for match in NODE.finditer(text):
        n = int(match[1])
        boxes[n] = (float(match[2]), float(match[3]), *box(graph.nodes[n]))
    paths = []
    for match in DRAW.finditer(text):
        source, target = int(match[2]), int(match[7])
        start, end = boxes[source][:2], boxes[target][:2]
        if match[3] is None:
            controls = (start, start, end, end)  # a straight line
        else:
            controls = (start, (float(match[3]), float(match[4])), (float(match[5]), float(match[6])), end)
        paths.append((match[1] == "bw", source, target, [_bezier(controls, k / SAMPLES) for k in range(SAMPLES + 1)]))
    assert len(paths) == len(graph.edges)
    return boxes, paths


def _bezier(points, s):
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points
    a, b, c, d = (1 - s) ** 3, 3 * (1 - s) ** 2 * s, 3 * (1 - s) * s**2, s**3
    return a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3


def _inside(point, node_box, slack=0.0):
    x, y, half_w, half_h = node_box
    return abs(point[0] - x) < half_w - slack and abs(point[1] - y) < half_h - slack


def _visible(points, boxes, source, target):
    return [p for p in points if not _inside(p, boxes[source]) and not _inside(p, boxes[target])]


def crossings(graph, within_steps=False):
    """The edges that run through a box other than their ends (only those inside one step if within_steps)."""
    boxes, paths = drawn(graph)
    found = []
    for _, source, target, points in paths:
        if within_steps and graph.nodes[source].step != graph.nodes[target].step:
            continue
        for n, node_box in boxes.items():
            if n not in (source, target) and any(_inside(p, node_box, SLACK) for p in points):
                found.append(f"{_name(graph, source)} -> {_name(graph, target)} crosses {_name(graph, n)}")
    return found


def overlaps(graph):
    """Backward edges whose visible part keeps within CLEARANCE of the forward edge between the same nodes."""
    boxes, paths = drawn(graph)
    forward = {(source, target): points for backward, source, target, points in paths if not backward}
    found = []
    for backward, source, target, points in paths:
        twin = forward.get((target, source))
        if not backward or twin is None:
            continue
        seen = _visible(points, boxes, source, target)
        chord = _visible(twin, boxes, source, target)
        if not seen or max(min(math.dist(p, q) for q in chord) for p in seen) < CLEARANCE:
            found.append(f"{_name(graph, source)} -> {_name(graph, target)} lies on its forward arrow")
    return found


def _name(graph, n):
    return "{}_{}".format(*graph.nodes[n].key)


# Not yet: an edge from step t-1 into a gate's pre-activation whose row the gates' row covers from above (gru's
# h_{t-1} -> z̄_t passes r_t; lstm's h_{t-1} -> ḡ_t, ō_t pass f_t; lstm-peephole's c_{t-1} -> f̄_t passes i_t).
# No single cubic reaches it: it needs a route through the 0.3 cm corridors between rows, or a layout that
# staggers the two rows.
CROSSING_STEPS = {"gru", "lstm", "lstm-peephole"}


@pytest.mark.parametrize("name", tuple(names()) + tuple(USERS))
def test_edges_miss_other_boxes_and_arrows_stand_apart(name):
    for graph in figures(model_of(name)):
        assert crossings(graph, within_steps=name in CROSSING_STEPS) == []
        assert overlaps(graph) == []


@settings(max_examples=12, database=None, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(plans())
def test_random_cells_figures_too(plan):
    """Inside a step no edge crosses a box, and no backward arrow lies on a forward one (edges between steps can
    still cross, as CROSSING_STEPS says)."""
    for graph in figures(build(plan)):
        assert crossings(graph, within_steps=True) == []
        assert overlaps(graph) == []


def test_an_edge_bends_around_a_box_on_its_chord():
    """Elman's y_3 moved onto the middle of the chord of h_1 -> a_2: that edge is drawn as a curve clear of it."""
    graph = figures(load("elman"))[0]
    h1, a2 = graph.node(("h", 1)), graph.node(("a", 2))
    moved = replace(
        graph,
        nodes=tuple(
            replace(node, x=(h1.x + a2.x) / 2, y=(h1.y + a2.y) / 2) if node.key == ("y", 3) else node
            for node in graph.nodes
        ),
    )
    ids = {node.key: n for n, node in enumerate(moved.nodes)}
    assert rf"\draw[fw] (n{ids[h1.key]}) .. controls" in tikz(moved)
    assert crossings(moved) == []
