"""The figures' edges as TikZ draws them, read back from the picture's text: no edge runs through a node box
other than its two ends, and a backward arrow stands clear of the forward arrow between the same two nodes
(issue 29: gru's m_t -> n̄_t crossed r_t; the arrows between h_t and ℓ_t lay on top of each other). A curve
is checked at points sampled along it, not by its chord."""

import functools
import itertools
import math
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from bptt.derive.models import load, names
from bptt.documents.drawing import box
from bptt.tests.documents.figure_models import (  # noqa: F401 (XDIST_GROUP: tests/conftest.py reads it)
    USERS,
    XDIST_GROUP,
    figure_tikz,
    figures,
    named_figures,
)
from bptt.tests.support.cell_plans import build
from bptt.tests.support.cells import plans

SAMPLES = 60
CLEARANCE = 0.12  # centimetres: the least distance of a backward curve's middle from its forward twin
SLACK = 0.02  # a path may graze a box's border by this much (the boxes are estimates)
NODE = re.compile(r"\\node\[v[^]]*\] \(n(\d+)\) at \(([-\d.]+),([-\d.]+)\)")
DRAW = re.compile(
    r"\\draw\[(fw|bw)[^]]*\] \(n(\d+)\) (?:--|\.\. controls \(([-\d.]+),([-\d.]+)\) and \(([-\d.]+),([-\d.]+)\) \.\.|"
    r"((?:-- \([-\d.]+,[-\d.]+\) )+)--) \(n(\d+)\);"
)
CORNER = re.compile(r"\(([-\d.]+),([-\d.]+)\)")


@functools.cache
def drawn(graph):
    """(boxes, paths): each node's box (x, y, half width, half height) by its id, and each edge as
    (backward, source id, target id, points sampled along what TikZ draws); read once per figure (crossings and
    overlaps read it)."""
    text = figure_tikz(graph)
    boxes = {}
    for match in NODE.finditer(text):
        n = int(match[1])
        boxes[n] = (float(match[2]), float(match[3]), *box(graph.nodes[n]))
    paths = []
    for match in DRAW.finditer(text):
        source, target = int(match[2]), int(match[8])
        start, end = boxes[source][:2], boxes[target][:2]
        if match[3] is not None:
            controls = (start, (float(match[3]), float(match[4])), (float(match[5]), float(match[6])), end)
            points = [_bezier(controls, k / SAMPLES) for k in range(SAMPLES + 1)]
        else:  # straight runs through the corners given, if any
            corners = [start, *((float(x), float(y)) for x, y in CORNER.findall(match[7] or "")), end]
            points = [p for a, b in itertools.pairwise(corners) for p in _run(a, b)]
        paths.append((match[1] == "bw", source, target, points))
    assert len(paths) == len(graph.edges)
    return boxes, paths


def _run(a, b, spacing=0.02):
    count = max(1, math.ceil(math.dist(a, b) / spacing))
    return [(a[0] + (b[0] - a[0]) * k / count, a[1] + (b[1] - a[1]) * k / count) for k in range(count + 1)]


def _bezier(points, s):
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points
    a, b, c, d = (1 - s) ** 3, 3 * (1 - s) ** 2 * s, 3 * (1 - s) * s**2, s**3
    return a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3


def _inside(point, node_box, slack=0.0):
    x, y, half_w, half_h = node_box
    return abs(point[0] - x) < half_w - slack and abs(point[1] - y) < half_h - slack


def _visible(points, boxes, source, target):
    return [p for p in points if not _inside(p, boxes[source]) and not _inside(p, boxes[target])]


def crossings(graph):
    """The edges that run through a box other than their ends: _inside(point, box, SLACK) for every point of a
    path and every box at once, the same differences and comparisons in NumPy's float64."""
    boxes, paths = drawn(graph)
    ids = list(boxes)
    x, y, half_w, half_h = np.array([boxes[n] for n in ids]).T
    found = []
    for _, source, target, points in paths:
        xy = np.array(points)
        hit = (np.abs(xy[:, :1] - x) < half_w - SLACK) & (np.abs(xy[:, 1:] - y) < half_h - SLACK)
        for n in (ids[k] for k in np.flatnonzero(hit.any(axis=0))):
            if n not in (source, target):
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


@pytest.mark.parametrize("name", tuple(names()) + tuple(USERS))
def test_edges_miss_other_boxes_and_arrows_stand_apart(name):
    for graph in named_figures(name):
        assert crossings(graph) == []
        assert overlaps(graph) == []


@settings(max_examples=12, database=None, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(plans())
def test_random_cells_figures_too(plan):
    """No edge crosses a box, and no backward arrow lies on a forward one."""
    for graph in figures(build(plan)):
        assert crossings(graph) == []
        assert overlaps(graph) == []


def test_an_edge_bends_around_a_box_on_its_chord():
    """Elman's y_3 moved onto the middle of the chord of h_1 -> a_2: that edge is drawn around it, not straight."""
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
    assert rf"\draw[fw] (n{ids[h1.key]}) -- (n{ids[a2.key]});" not in figure_tikz(moved)
    assert crossings(moved) == []
