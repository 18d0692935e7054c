"""The unrolled computation as drawn: the edges a chunked truncation cuts are the ones the generated code
cuts, and no two nodes of a figure overlap."""

import itertools
import math

import pytest

from bptt.derive.models import load, names
from bptt.documents.drawing import box
from bptt.documents.graph import Node
from bptt.documents.routing import controls
from bptt.tests.documents.figure_models import USERS, figures, named_figures

MODELS = tuple(names())


@pytest.mark.parametrize("name", ["elman", "lstm", "elman-jordan"])
def test_chunks_cut_only_the_flow_into_a_later_chunk(name):
    """Chunks of 2 steps cut the backward edges from step 3 into step 2, and nothing into step 0: the code
    detaches the state entering step 3 and gives the given initial state its gradient (keep[0] = 1)."""
    _, truncated = figures(load(name))
    cut = {(e.source[1], e.target[1]) for e in truncated.edges if e.cut}
    assert cut == {(3, 2)}
    kept = {(e.source[1], e.target[1]) for e in truncated.edges if e.backward and not e.cut}
    assert (1, 0) in kept and (2, 1) in kept
    assert all(e.backward for e in truncated.edges if e.cut)


@pytest.mark.parametrize("name", MODELS + tuple(USERS))
def test_no_two_nodes_overlap(name):
    """Every two nodes of each figure are apart, horizontally or vertically, by more than their boxes: the
    initial states of elman-jordan's truncation figure (h_0 and o_0) once sat on top of each other."""
    for graph in named_figures(name):
        for a, b in itertools.combinations(graph.nodes, 2):
            (wa, ha), (wb, hb) = box(a), box(b)
            apart = abs(a.x - b.x) >= wa + wb or abs(a.y - b.y) >= ha + hb
            assert apart, f"{name}: {a.name}_{a.step} at ({a.x}, {a.y}) and {b.name}_{b.step} at ({b.x}, {b.y})"


def test_a_backward_edge_bends_to_its_left_as_tikz_would():
    """The control points TikZ is given for h_2 -> h_1 (drawn 1 cm to the left) lie 22 degrees off the chord, below
    it (to the left of the direction of travel), each 0.3915 of the chord from its end: TikZ's `bend left=22`."""
    source, target = Node("h", 2, "state", x=1.0, y=0.0), Node("h", 1, "state", x=0.0, y=0.0)
    (x1, y1), (x2, y2) = controls(source, target, 22)[1:3]
    reach = 0.3915
    assert (x1, y1) == pytest.approx((1 - reach * math.cos(math.radians(22)), -reach * math.sin(math.radians(22))))
    assert (x2, y2) == pytest.approx((reach * math.cos(math.radians(22)), -reach * math.sin(math.radians(22))))
