"""The parameters in the figure of the unrolled computation, read back from its TikZ and its SVG: every parameter
of the model stands once in a box above the steps, and a dashed arrow runs from its box to the label of every
step column holding a value whose equation reads it (issue 29: d2l's figure 9.7.2 draws the parameters; their
sharing across steps is why every gradient is a sum over t)."""

import re

import pytest

from bptt.derive.models import names
from bptt.documents.drawing import svg
from bptt.documents.graph import LOSS, STEPS
from bptt.documents.latex import latex
from bptt.tests.documents.figure_models import (  # noqa: F401 (XDIST_GROUP: tests/conftest.py reads it)
    USERS,
    XDIST_GROUP,
    figure_tikz,
    model_of,
    named_figures,
)

PARAMS = re.compile(r"\\node\[p, [^]]*\] \(p(\d+)\) at \(([-\d.]+),([-\d.]+)\) \{\$(.*)\$\};")
LABEL = re.compile(r"\\node\[black!60\] \(s(\d+)\) at \(([-\d.]+),([-\d.]+)\) \{\$t = (\d+)\$\};")
NODE = re.compile(r"\\node\[v[^]]*\] \(n(\d+)\) at \(([-\d.]+),([-\d.]+)\)")
ARROW = re.compile(r"\\draw\[pw\] \(p(\d+)\.south\) -- \(s(\d+)\);")


def reading_steps(model, graph, param):
    """The steps of the figure holding a value (or a loss) whose equation reads the parameter (not the columns of
    initial values, step 0 and, for reverse-time states, step STEPS + 1)."""
    equations = {seq.name: rhs for seq, rhs in model.assignments if seq not in model.forced}
    equations[LOSS] = model.loss
    return {
        node.step
        for node in graph.nodes
        if node.name in equations and param in equations[node.name].free_symbols and 1 <= node.step <= STEPS
    }


@pytest.mark.parametrize("name", tuple(names()) + tuple(USERS))
def test_every_parameter_is_drawn_once_with_arrows_to_the_steps_that_read_it(name):
    model, graph = model_of(name), named_figures(name)[0]
    text = figure_tikz(graph)
    boxes = {int(m[1]): (float(m[2]), float(m[3]), m[4].split(", ")) for m in PARAMS.finditer(text)}
    drawn = [label for _, _, labels in boxes.values() for label in labels]
    assert sorted(drawn) == sorted(latex(param) for param in model.params)

    nodes = [(int(m[1]), float(m[2]), float(m[3])) for m in NODE.finditer(text)]
    labels = {int(m[1]): (float(m[2]), float(m[3])) for m in LABEL.finditer(text)}
    for step, (x, _) in labels.items():  # each step's label stands over the middle of its column
        xs = [nx for n, nx, _ in nodes if graph.nodes[n].step == step]
        assert x == pytest.approx((min(xs) + max(xs)) / 2, abs=2e-3)
    top = max(y for _, _, y in nodes)
    assert all(y > top for _, y, _ in boxes.values())  # above the steps

    arrows = {}
    for m in ARROW.finditer(text):
        arrows.setdefault(int(m[1]), set()).add(int(m[2]))
    by_label = {label: n for n, (_, _, found) in boxes.items() for label in found}
    for param in model.params:
        expected = reading_steps(model, graph, param)
        assert expected, f"{param} is read by no step"
        assert arrows.get(by_label[latex(param)], set()) == expected, f"{name}: {param}"


@pytest.mark.parametrize("name", ["elman", "lstm", "gru"])
def test_the_svg_draws_the_same_parameters_and_arrows(name):
    """The SVG (Markdown, notebooks) carries the same boxes and arrows as the TikZ."""
    graph = named_figures(name)[0]
    picture = svg(graph)
    arrows = len(ARROW.findall(figure_tikz(graph)))
    assert picture.count('stroke-dasharray="3,2"') == arrows > 0
    for param in model_of(name).params:
        base, _, sub = str(param).partition("_")
        assert f'<tspan font-weight="bold">{base}</tspan><tspan font-size="9" dy="3">{sub}</tspan>' in picture
