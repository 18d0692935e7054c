"""The unrolled computation as document figures: the whole graph, and its states with the edges a
truncation cuts."""

import functools

from bptt.derive.direction import initial_time, reverse_states
from bptt.derive.nodes import T
from bptt.documents.drawing import box
from bptt.documents.equation import Figure, Section
from bptt.documents.graph import STEPS, chunked, skeleton, unrolled
from bptt.documents.latex import latex
from bptt.documents.prose import listed
from bptt.documents.routing import widened

LEGEND = (
    "Grey arrows are the forward computation: an arrow from $u$ to $v$ means that the equation of $v$ reads $u$. "
    "Red arrows are the backward recursion: an arrow from $u$ to $v$ means that $\\partial L / \\partial v$ is "
    "computed from $\\partial L / \\partial u$. "
    "Inputs and labels are grey, states blue, outputs green, the losses $\\ell_t$ orange."
)
SHARED = (
    "The parameters stand once above the steps, those read by the same values in one yellow box, and a dashed "
    "arrow runs from each box to every step that reads them: each step adds its own term to a parameter's "
    "gradient, which is therefore a sum over $t$."
)


@functools.lru_cache(maxsize=2)  # drawn for the graph section, and again under the truncation figure
def whole_graph(facts):
    """The unrolled computation of the model, every value a node."""
    return widened(unrolled(facts.model, facts.substituted, _half_width), box)


def truncated_graph(facts):
    """Its states, outputs and losses, with the edges that chunks of two steps cut."""
    return chunked(widened(skeleton(whole_graph(facts), _half_width), box), tau=2)


def _half_width(node):
    return box(node)[0]


def graph_section(facts):
    model = facts.model
    graph = whole_graph(facts)
    caption = f"The unrolled computation: steps 1 to 3 of the model, from the initial {_initial(model)}. {LEGEND}"
    caption += f" {SHARED}" if graph.shared else ""
    reverse = [f"${latex(seq())}$" for seq in reverse_states(model)]
    if reverse:
        one = len(reverse) == 1
        caption += (
            f" The reverse-time {listed(reverse)} {'runs' if one else 'run'} from step 3 back to step 1, from "
            f"{'its initial value' if one else 'their initial values'} after the last step, and "
            f"{'its adjoint' if one else 'their adjoints'} from step 1 forward."
        )
    forced = [f"${latex(seq())}$" for seq, _ in model.teacher_forcing]
    if forced:
        caption += (
            f" Under teacher forcing each step reads the data that replaces {listed(forced)}, not the value the "
            "step before computed."
        )
    text = (
        "The figure of the unrolled computation draws every value of three steps as a node, and every read of "
        "one value by the equation of another as an arrow, read off the model's equations."
    )
    return Section("graph", "The computation unrolled", text, (Figure(graph, caption),), ("adjoint",))


def truncation_figure(facts):
    graph = truncated_graph(facts)
    caption = (
        "Truncated: the states, outputs and losses of the unrolled computation, each grey arrow a chain of reads "
        "through the intermediates. Chunks of two steps ($\\tau = 2$) cut the dashed red arrows: the state entering "
        "step 3 is detached, so no gradient flows from step 3 into step 2."
    )
    return Figure(graph, caption)


def _initial(model):
    initial = [f"${latex(seq(initial_time(model, seq).subs(T, STEPS)))}$" for seq in model.states]
    return f"state{'s' if len(initial) > 1 else ''} {listed(initial)}"
