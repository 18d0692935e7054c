"""The computation of a model unrolled over three steps, as a graph read off the model itself: a node per
value (inputs, initial states, intermediates, states, outputs, labels, each step's loss), a forward edge
per read, and the backward edges of the adjoint recursion (which adjoints each state's adjoint is computed
from). Laid out with time left to right and each step's values bottom to top in the order they are computed."""

from dataclasses import dataclass, replace

from bptt.derive.bptt import NEXT, PREVIOUS
from bptt.derive.nodes import Adj, references, t
from bptt.documents.layout import laid_out

STEPS = 3  # the steps drawn
LOSS = "loss"  # the name of each step's loss node


@dataclass(frozen=True)
class Node:
    name: str  # the sequence's name, or LOSS
    step: int
    role: str  # input, label, target, state, intermediate, output, loss
    x: float = 0.0  # centimetres
    y: float = 0.0

    @property
    def key(self):
        return (self.name, self.step)


@dataclass(frozen=True)
class Edge:
    source: tuple  # a Node key
    target: tuple
    backward: bool = False  # an edge of the adjoint recursion: the target's adjoint reads the source's
    cut: bool = False  # cut by the truncation the figure shows


@dataclass(frozen=True)
class Shared:
    """Parameters drawn once, above the steps: those the same values read, and the steps that read them."""

    params: tuple  # the model's MatrixSymbols
    steps: tuple


@dataclass(frozen=True)
class Graph:
    nodes: tuple
    edges: tuple
    shared: tuple = ()  # Shared groups of parameters, drawn above the steps

    def node(self, key):
        return next(node for node in self.nodes if node.key == key)


def unrolled(model, substituted, half_width):
    """The Graph of a model over STEPS steps; substituted: its derivation with every intermediate substituted;
    half_width(node): half the width of a node's box as drawn, in centimetres."""
    nodes, edges = _forward(model)
    keys = {node.key for node in nodes}
    edges += [edge for edge in _backward(model, substituted) if edge.source in keys and edge.target in keys]
    edges = list(dict.fromkeys(edges))
    return Graph(tuple(laid_out(nodes, edges, LOSS, half_width, final=STEPS + 1)), tuple(edges), _shared(model))


def _shared(model):
    """The model's parameters in groups, each group the parameters that the same values read (a gate's weights
    and biases), with the steps that read them: every step that computes one of those values."""
    computed = [(seq.name, rhs) for seq, rhs in model.assignments if seq not in model.forced]
    computed.append((LOSS, model.loss))
    groups = {}
    for param in model.params:
        readers = tuple(name for name, rhs in computed if param in rhs.free_symbols)
        groups.setdefault(readers, []).append(param)
    return tuple(
        Shared(tuple(params), tuple(range(1, STEPS + 1)) if readers else ()) for readers, params in groups.items()
    )


def _sources(model, ref, step):
    """The node keys a read of `ref` by step `step` stands for: a teacher-forced state read at t-1 is, from
    step 2 on, the data that replaces it."""
    offset = int(ref.time - t)
    forced = model.forced.get(next((s for s in model.states if s.name == ref.name), None))
    if forced is not None and step + offset >= 1:
        return [(r.name, step + offset) for r in references(forced)]
    return [(ref.name, step + offset)]


def _forward(model):
    roles = {seq.name: seq.role for seq in model.sequences()}
    nodes, edges = {}, []
    computed = [(seq, rhs) for seq, rhs in model.assignments if seq not in model.forced]
    for step in range(1, STEPS + 1):
        for seq, rhs in computed:
            nodes[(seq.name, step)] = Node(seq.name, step, seq.role)
            for ref in references(rhs):
                for source in _sources(model, ref, step):
                    edges.append(Edge(source, (seq.name, step)))
        nodes[(LOSS, step)] = Node(LOSS, step, LOSS)
        edges += [Edge(source, (LOSS, step)) for ref in references(model.loss) for source in _sources(model, ref, step)]
    for edge in edges:
        if edge.source not in nodes:
            name, step = edge.source
            nodes[edge.source] = Node(name, step, roles[name])
    return list(nodes.values()), edges


def _backward(model, substituted):
    """Edges from each adjoint to the adjoints computed from it: a state's (or a teacher-forced initial
    value's) from those its recursion reads, an output's from its step's loss."""
    out = [Edge((LOSS, n), (seq.name, n), backward=True) for seq, _ in model.outputs for n in range(1, STEPS + 1)]
    found = [(state, c) for state, cs in substituted.states.items() for c in cs]
    found += [(state, c) for state, cs in substituted.forced.items() for c in cs if c.when == NEXT]
    shifts = {NEXT: -1, PREVIOUS: 1}  # a forward state's adjoint reaches step 0, a reverse one's step T+1
    for state, contribution in found:
        if state in model.forced:
            steps = range(0, 1)  # the given initial value; later ones are data
        else:
            shift = shifts.get(contribution.when, 0)
            steps = range(1 + shift, STEPS + 1 + shift)
        for adjoint in sorted(contribution.value.atoms(Adj), key=str):
            offset = int(adjoint.of.time - t)
            out += [Edge((adjoint.of.name, n + offset), (state.name, n), backward=True) for n in steps]
    return out


def skeleton(graph, half_width, kept=("state", "output", LOSS)):
    """The graph with only the nodes of the kept roles, a forward edge wherever a chain of dropped nodes
    linked two of them (a state reads the last one through its gates), backward edges as they are."""
    keep = {node.key for node in graph.nodes if node.role in kept}
    reads = {}
    for edge in graph.edges:
        if not edge.backward:
            reads.setdefault(edge.target, []).append(edge.source)

    def kept_sources(key, seen=()):
        found = []
        for source in reads.get(key, []):
            if source in keep:
                found.append(source)
            elif source not in seen:
                found += kept_sources(source, (*seen, source))
        return found

    edges = [Edge(source, key) for key in sorted(keep) for source in dict.fromkeys(kept_sources(key))]
    edges += [edge for edge in graph.edges if edge.backward and edge.source in keep and edge.target in keep]
    nodes = [node for node in graph.nodes if node.key in keep]
    return Graph(tuple(laid_out(nodes, edges, LOSS, half_width)), tuple(edges))


def chunked(graph, tau=2):
    """The graph with the backward edges that chunks of tau steps cut dashed: into step t >= 1 from step t+1,
    tau | t (the first chunk starts at step 1: the given initial state keeps its gradient)."""

    def cut(edge):
        into = edge.target[1]
        return edge.backward and edge.source[1] == into + 1 and into >= 1 and into % tau == 0

    edges = tuple(replace(e, cut=cut(e)) for e in graph.edges)
    return replace(graph, edges=edges)
