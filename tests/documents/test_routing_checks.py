"""routing.py's tests of a curve, written for speed (boxes far from the path skipped, a scan that stops early, samples
from weights computed once), say what their plain definitions say, on random boxes and points: a path crosses a box
when a point of it lies within 0.03 cm of a box other than its ends' (inside(point, box, 0.03)); a backward path
stands apart from its twin when the largest, over its points outside its ends' boxes, of the least distance to the
twin is at least CLEARANCE; a sampled point is point_at(curve, k / count), and every n-th of them is those."""

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bptt.documents.graph import Edge
from bptt.documents.routing import (
    CLEARANCE,
    _apart,
    _crossed,
    _visible,
    inside,
    point_at,
    sampled_points,
)

coordinate = st.floats(-1, 1, allow_nan=False)  # near the boxes: many points within reach of their borders
point = st.tuples(coordinate, coordinate)
half = st.floats(0.05, 0.6)
boxes = st.lists(st.tuples(coordinate, coordinate, half, half), min_size=2, max_size=8)
EDGE = Edge((0, 0), (1, 0), backward=True)


def table(found):
    return {(n, 0): found_box for n, found_box in enumerate(found)}


@settings(max_examples=150, deadline=None)
@given(boxes, st.lists(point, min_size=1, max_size=40))
@example([(5, 5, 0.1, 0.1), (6, 6, 0.1, 0.1), (0, 0, 0.5, 0.5)], [(0.525, 0.0)])  # 0.025 right of a border
@example([(5, 5, 0.1, 0.1), (6, 6, 0.1, 0.1), (0, 0, 0.5, 0.5)], [(0.1, -0.525)])  # 0.025 below it
@example([(5, 5, 0.1, 0.1), (6, 6, 0.1, 0.1), (0, 0, 0.5, 0.5)], [(0.1, 0.535)])  # 0.035 above it: clear
def test_crossed_is_a_point_within_003_of_another_box(found, points):
    others = found[2:]
    assert _crossed(points, EDGE, table(found)) == any(inside(p, b, 0.03) for p in points for b in others)


@settings(max_examples=150, deadline=None)
@given(boxes, st.lists(point, min_size=1, max_size=30), st.lists(point, min_size=1, max_size=30))
@example([(5, 5, 0.1, 0.1), (6, 6, 0.1, 0.1)], [(0.0, 0.0), (0.0, 0.2)], [(0.0, 0.05), (0.0, 0.4)])  # near first
@example([(5, 5, 0.1, 0.1), (6, 6, 0.1, 0.1)], [(0.0, 0.0), (0.0, 0.2)], [(0.0, 0.4), (0.0, 0.05)])  # near last
@example([(5, 5, 0.1, 0.1), (6, 6, 0.1, 0.1)], [(0.0, 0.0), (0.0, 0.9)], [(0.0, 0.05), (0.0, 0.4)])  # one apart
def test_apart_is_the_largest_least_distance_at_least_clearance(found, points, twin):
    ends = table(found)
    ends_of = (ends[EDGE.source], ends[EDGE.target])
    seen = [p for p in points if not any(inside(p, b) for b in ends_of)]
    other = [q for q in twin if not any(inside(q, b) for b in ends_of)] or twin
    expected = bool(seen) and max(min(math.dist(p, q) for q in other) for p in seen) >= CLEARANCE
    assert _apart(points, _visible(twin, ends, EDGE) or twin, ends, EDGE) == expected


@settings(max_examples=50, deadline=None)
@given(st.tuples(point, point, point, point))
@example(((0.1, 0.7), (1.3, -0.4), (2.9, 0.33), (0.77, 1.9)))
@example(((-0.731, 0.695), (0.528, -0.49), (-0.009, -0.101), (0.303, 0.577)))  # a sum in another order differs
def test_sampled_points_are_point_at_each_step(curve):
    sampled = sampled_points(curve)
    count = len(sampled) - 1
    assert count >= 40
    assert sampled == [point_at(curve, k / count) for k in range(count + 1)]
    assert sampled_points(curve, 8) == sampled[::8]  # routes() looks at these first: a crossing there is one
