"""The derivation of a model with reverse-time states as a document: each direction's terminal adjoint,
recursion and initial value (h_b at T+1), the closed form in both directions and where they meet (the outputs,
the layer above), and the unrolled graph with both directions; the sections that are forward states' only left
out."""

import pytest

from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.models import load
from bptt.derive.nodes import Adj, SquaredError, T, t, tanh
from bptt.documents.derived import derived
from bptt.documents.document import available, sections
from bptt.documents.graph_document import whole_graph
from bptt.documents.latex import latex
from bptt.examples.birnn import birnn, two_layers
from bptt.tests.derive.test_reverse_mirror import CELLS, mirrored

H_B = r"\mathbf{h}_{\textrm{b},"  # h_b at some step, as the document prints it
ADJ = r"\frac{\partial L}{\partial "


def rows(section):
    """Every `lhs = rhs` of a section's displays, one string each, with the sentence before it."""
    found = []
    for item in section.items:
        for eq in getattr(item, "equations", ()):
            found.append((eq.why, f"{eq.lhs} = {eq.rhs}"))
    return found


@pytest.fixture(scope="module")
def document():
    return {section.name: section for section in sections(birnn())}


def test_the_forward_only_sections_are_left_out():
    names = available(birnn())  # the zoo's birnn: its document ends against its source
    assert names == ("model", "graph", "outputs", "backward", "parameters", "closed-form", "source")


def test_the_model_starts_the_reverse_state_after_the_last_step(document):
    assert rf"{H_B}T+1}}" in document["model"].text and r"\mathbf{h}_{\textrm{f},0}" in document["model"].text


def test_the_reverse_adjoint_starts_at_step_1_and_runs_forward(document):
    backward = rows(document["backward"])
    lhs = [eq.split(" = ")[0] for _, eq in backward]
    assert f"{ADJ}{H_B}1}}}}" in lhs and f"{ADJ}{H_B}T+1}}}}" in lhs and f"{ADJ}{H_B}t}}}}" in lhs
    (why, recursion), *_ = [(w, eq) for w, eq in backward if eq.startswith(f"{ADJ}{H_B}t}}}}")]
    assert why.startswith("For $t > 1$") and f"{ADJ}{H_B}t-1}}}}" in recursion and f"{H_B}t+1}}" not in recursion
    assert "runs forward in time" in document["backward"].text


def test_the_closed_form_in_both_directions_and_where_they_meet(document):
    closed = document["closed-form"]
    shown = " ".join(eq for _, eq in rows(closed))
    assert r"\sum_{j=t}^{T}" in shown and r"\sum_{j=1}^{t}" in shown
    assert r"\mathbf{A}^{hb}_{t-1} \mathbf{A}^{hb}_{t-2} \cdots \mathbf{A}^{hb}_{j}" in shown
    assert rf"${ADJ}\mathbf{{s}}_{{t}}}}$ enters the local terms of" in closed.text


def test_two_layers_meet_in_the_adjoints_of_the_layer_above():
    closed = next(s for s in sections(two_layers(), only=["closed-form"]))
    layer = r"{\mathbf{h}^{(%d)}}_{\textrm{%s},t}"
    above = f"${ADJ}{layer % (2, 'b')}}}$ and ${ADJ}{layer % (2, 'f')}}}$"
    assert f"{above} enter the local terms of ${layer % (1, 'f')}$ and ${layer % (1, 'b')}$;" in closed.text
    assert f"${ADJ}\\mathbf{{s}}_{{t}}}}$ enters the local terms of ${layer % (2, 'f')}$ and" in closed.text


def test_the_unrolled_graph_draws_both_directions():
    """Forward reads h_b,t+1 -> h_b,t; the reverse adjoint h_b,t -> h_b,t+1, into the initial value h_b,4."""
    graph = whole_graph(derived(birnn()))
    forward = {(e.source, e.target) for e in graph.edges if not e.backward}
    backward = {(e.source, e.target) for e in graph.edges if e.backward}
    assert (("h_b", 4), ("h_b", 3)) in forward and (("h_f", 0), ("h_f", 1)) in forward
    assert {(("h_b", n), ("h_b", n + 1)) for n in (1, 2, 3)} <= backward
    assert (("h_f", 1), ("h_f", 0)) in backward
    final = graph.node(("h_b", 4))
    assert final.x > max(node.x for node in graph.nodes if node.step == 3)


def test_a_direction_of_several_states_has_its_stacked_closed_form():
    """h reads c at t-1 and c reads h at t-1: each recursion reads the other's adjoint from the next step, which
    the per-state closed form does not cover; the forward direction gets the stacked closed form (A_k from P and
    S), the reverse state g its own."""
    d, h, q = sizes("d h q")
    x, o, y = sequence("x", d, "input"), sequence("o", q, "output"), sequence("y", q, "target")
    hidden, cell, back = (sequence(name, h, "state") for name in ("h", "c", "g"))
    W, U, R, V = matrix("W", h, d), matrix("U", h, h), matrix("R", h, h), matrix("V", q, h)
    model = Model(
        name="pair",
        title="pair",
        source="tests",
        sizes=(d, h, q),
        params=(W, U, R, V),
        inputs=(x,),
        steps=(
            (cell, tanh(W * x() + U * hidden(t - 1))),
            (hidden, tanh(R * cell(t - 1))),
            (back, tanh(W * x() + U * back(t + 1))),
        ),
        outputs=((o, V * hidden() + V * back()),),
        loss=SquaredError(o(), y()),
    )
    closed = next(section for section in sections(model) if section.name == "closed-form")
    lhs = [eq.lhs for eq in closed.equations]
    assert "No closed form" not in closed.text
    assert r"\mathbf{A}^{ch}_{k}" in lhs and r"\mathbf{A}^{hc}_{k}" in lhs and r"\mathbf{A}^{g}_{k}" in lhs


@pytest.mark.parametrize("name", CELLS)
def test_every_zoo_cell_in_reverse_time_has_a_document(name):
    """Each zoo cell with its states read at t+1: every state's adjoint starts at step 1 and ends at T+1."""
    model = mirrored(load(name))
    built = {section.name: section for section in sections(model)}
    assert set(built) == set(available(model)) and "closed-form" in built and "truncation" not in built
    lhs = [eq.split(" = ")[0] for _, eq in rows(built["backward"])]
    for seq in model.states:
        first, last = (latex(Adj(seq(time))) for time in (1, T + 1))
        assert first in lhs and last in lhs, (seq.name, lhs)
    single = "from $t = 1$"  # one state: its closed form; LSTM's h and c: the stacked one, B_k unrolled from t = 1
    closed = built["closed-form"]
    forward = {section.name: section for section in sections(load(name))}["closed-form"].text
    if "No closed form" in forward:  # a norm's adjoint reads h's and c's at once (lstm-layernorm): none either way
        assert forward[forward.index("No closed form") :] in closed.text
    elif len(model.states) == 1:
        assert single in closed.text
    else:
        assert "No closed form" not in closed.text and any(
            eq.lhs.startswith(r"\mathbf{B}^{") for eq in closed.equations
        )
