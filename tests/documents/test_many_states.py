"""The figures and block matrices of a cell of many states and wide levels, as a layer that reads two chains
makes (examples/lstm_two_chains.py: eight states, eight gates a level in each step): every initial state has a
level of its own and no two nodes overlap.
The example's document is compiled, and checked for overfull lines, with the other examples' (printed.EXAMPLES)."""

import itertools
import pathlib

from bptt.derive.models import load
from bptt.documents.derived import derived
from bptt.documents.drawing import box
from bptt.documents.graph import Edge, Node
from bptt.documents.graph_document import truncated_graph, whole_graph
from bptt.documents.layout import laid_out

EXAMPLE = f"{pathlib.Path(__file__).resolve().parents[2] / 'examples' / 'lstm_two_chains.py'}:lstm"


def test_no_two_nodes_of_the_two_chain_lstm_overlap():
    """Both figures (the whole computation, and the states of the truncation's): every two nodes apart by more than
    their boxes, the eight gates of a level in two rows of four."""
    facts = derived(load(EXAMPLE))
    for graph in (whole_graph(facts), truncated_graph(facts)):
        for a, b in itertools.combinations(graph.nodes, 2):
            (wa, ha), (wb, hb) = box(a), box(b)
            apart = abs(a.x - b.x) >= wa + wb or abs(a.y - b.y) >= ha + hb
            assert apart, f"{a.name}_{a.step} at ({a.x}, {a.y}) and {b.name}_{b.step} at ({b.x}, {b.y})"
        initial = [node.y for node in graph.nodes if node.step == 0]
        assert len(initial) == len(set(initial)) == 8


def test_more_initial_states_than_levels_each_take_a_level():
    """Four states that read nothing in their own step (one level of values) and their initial values: step 0's
    column is one node wide, so the four initial values take four levels."""
    names = ("a", "b", "c", "d")
    nodes = [Node(name, step, "state") for name in names for step in (0, 1)]
    edges = [Edge((name, 0), (name, 1)) for name in names]
    levels = {node.name: node.y for node in laid_out(nodes, edges, "loss", lambda node: 0.3) if node.step == 0}
    assert len(set(levels.values())) == 4
