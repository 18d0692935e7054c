"""The models whose figures tests/documents/test_figure_*.py and test_graph.py check: the zoo, users' cells and
the examples (two-layer and two-chain LSTMs, bidirectional taggers), and their figures, made once per process."""

import functools

from bptt.derive.models import load
from bptt.documents.derived import derived
from bptt.documents.drawing import tikz
from bptt.documents.graph_document import truncated_graph, whole_graph
from bptt.examples import birnn, lstm_2layer, lstm_two_chains, torch_lstm
from bptt.tests.support.user_cells import gru_cho, mgu

# The test files that import it form one work unit (tests/conftest.py): named_figures and figure_tikz's caches
# are filled once, not once in each worker (the two-chain LSTM's figures take seconds to route).
XDIST_GROUP = "figures of the zoo, users' cells and the examples"

USERS = {
    "gru_cho": gru_cho,
    "mgu": mgu,
    "lstm_2layer": lstm_2layer.lstm,
    "lstm_2layer_separate": lstm_2layer.separate,
    "torch_lstm": torch_lstm.lstm,
    "lstm_two_chains": lstm_two_chains.lstm,
    "birnn": birnn.birnn,
    "birnn_2layer": birnn.two_layers,
}


def figures(model):
    """The document's two figures of a model: the whole computation, and its states as the truncation shows them."""
    facts = derived(model)
    return whole_graph(facts), truncated_graph(facts)


def model_of(name):
    return USERS[name]() if name in USERS else load(name)


@functools.cache
def named_figures(name):
    """figures(model_of(name)), made once per test process: the two-chain LSTM's take seconds."""
    return figures(model_of(name))


@functools.cache
def figure_tikz(graph):
    """tikz(graph), drawn once per test process (documents/routing.py's cache keeps only the last few figures)."""
    return tikz(graph)
