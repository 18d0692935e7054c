"""The shapes of cells that broke users, as predicates on a Model (tests/oracle/test_random_cells.py
shows that tests/support/cells.py draws each)."""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.elementwise import Apply
from bptt.derive.nodes import SeqAt, SoftmaxCrossEntropy, SquaredError, t
from bptt.tests.support.cell_plans import ACTIVATIONS, GATE_POWERS, h


def nodes(model):
    return [(seq, node) for seq, rhs in model.assignments for node in sp.preorder_traversal(rhs)]


def _second_layer_reads_the_first_at_t(model):
    """A step of layer 2 reads h1_t through a matrix that no step of layer 1 reads."""
    layer_one = {p for seq, node in nodes(model) if seq.name.removesuffix("_bar")[-1] == "1" for p in _params(node)}
    return any(
        seq.name.removesuffix("_bar")[-1] == "2"
        and isinstance(node, sp.MatMul)
        and node.args[-1] == SeqAt("h1", t, h, "state")
        and not set(_params(node.args[-2])) & layer_one
        for seq, node in nodes(model)
    )


def _params(node):
    return [a for a in sp.preorder_traversal(node) if isinstance(a, sp.MatrixSymbol)]


def _unnamed_gate_feeds_a_gate(model):
    """An intermediate g_t = f(sum), not f(g_bar_t), read by another intermediate."""
    unnamed = {seq.name for seq, rhs in model.steps if seq.role == "intermediate" and _unnamed(rhs)}
    return any(
        seq.role == "intermediate" and isinstance(node, SeqAt) and node.name in unnamed for seq, node in nodes(model)
    )


def _unnamed(rhs):
    return isinstance(rhs, Apply) and isinstance(rhs.arg, sp.MatAdd)


def _matrix_times_elementwise_product(model):
    return any(
        isinstance(node, sp.MatMul) and isinstance(node.args[-1], sp.HadamardProduct) for _, node in nodes(model)
    )


def _plus_one(model):
    """A sum of a weight times a vector and the ones vector: W x_t + ... + 1."""
    return any(_sums_ones(node) and any(_weighted(a) for a in node.args) for _, node in nodes(model))


def _one_minus_a_gate(model):
    """1 - z_t: the ones vector minus a sequence value."""
    return any(
        _sums_ones(node)
        and any(isinstance(a, sp.MatMul) and a.args[0] == -1 and isinstance(a.args[1], SeqAt) for a in node.args)
        for _, node in nodes(model)
    )


def _sums_ones(node):
    return isinstance(node, sp.MatAdd) and any(isinstance(a, OneMatrix) for a in node.args)


def _weighted(term):
    return isinstance(term, sp.MatMul) and isinstance(term.args[0], (sp.MatrixSymbol, sp.MatrixSlice))


def _stacked_blocks(model):
    """Two or more blocks of rows of one parameter of k*h rows, W_ih1[k*h:(k+1)*h, :], k blocks."""
    blocks = {node for _, node in nodes(model) if isinstance(node, sp.MatrixSlice)}
    parents = [block.parent for block in blocks]
    return any(parents.count(p) >= 2 and p.shape[0] == parents.count(p) * h for p in parents)


def _power(model, exponent):
    return any(isinstance(node, sp.HadamardPower) and node.exp == exponent for _, node in nodes(model))


def _transposed_weight(model):
    """A^T s_{t-1}: a product whose first factor is a parameter's transpose."""
    return any(
        isinstance(node, sp.MatMul) and isinstance(node.args[0], sp.Transpose) and node.args[0].arg in model.params
        for _, node in nodes(model)
    )


def _weight_minus_its_transpose(model):
    """(A - A^T - I/4) s_{t-1}: a product by a sum of a parameter, its transpose and the identity."""
    return any(
        isinstance(node, sp.MatAdd)
        and any(isinstance(a, sp.Identity) for a in sp.preorder_traversal(node))
        and any(isinstance(a, sp.Transpose) for a in sp.preorder_traversal(node))
        for _, node in nodes(model)
    )


def _column_blocks(model, head):
    """The head (head True) or a step reads two or more blocks of columns of one parameter, each block fewer
    columns than the parameter's."""
    blocks = [
        node
        for seq, node in nodes(model)
        if (seq.role == "output") == head
        and isinstance(node, sp.MatrixSlice)
        and (node.colslice[0] != 0 or node.colslice[1] != node.parent.shape[1])
    ]
    return any(len({b.colslice for b in blocks if b.parent == block.parent}) >= 2 for block in blocks)


def _sliced_intermediate(model):
    """Two or more blocks of rows of an intermediate, a_t[:h, :] and a_t[h:2h, :], each read by a sum."""
    blocks = {node for _, node in nodes(model) if isinstance(node, sp.MatrixSlice) and isinstance(node.parent, SeqAt)}
    return any(b.parent.role == "intermediate" and sum(c.parent == b.parent for c in blocks) >= 2 for b in blocks)


def _gate_power(model, exponent):
    """A power of a gate through a sigmoid, sigmoid(tanh(g_t))^e."""
    return any(
        isinstance(node, sp.HadamardPower) and node.exp == exponent and isinstance(node.base, Apply)
        for _, node in nodes(model)
    )


def _functions(model):
    return {node.function for _, node in nodes(model) if isinstance(node, Apply)}


SHAPES = {
    "layer 2 reads layer 1's state at t through its own input weights": _second_layer_reads_the_first_at_t,
    "a gate without a named pre-activation feeds another gate": _unnamed_gate_feeds_a_gate,
    "a matrix times an elementwise product, U (r_t * h_{t-1})": _matrix_times_elementwise_product,
    "+ 1 in a sum": _plus_one,
    "1 - z_t": _one_minus_a_gate,
    "stacked weights read by blocks": _stacked_blocks,
    "a layer reads the states of the layer below through blocks of columns": lambda m: _column_blocks(m, head=False),
    "a head reads the states through blocks of columns of V": lambda m: _column_blocks(m, head=True),
    "a named pre-activation feeds a gate": lambda m: any(s.name.endswith("_bar") for s in m.intermediates),
    "two states in a layer (h, c)": lambda m: {"h1", "c1"} <= {s.name for s in m.states},
    "three states": lambda m: len(m.states) == 3,
    "three layers": lambda m: "h3" in {s.name for s in m.states},
    "teacher forcing": lambda m: bool(m.teacher_forcing),
    "a summed squared error": lambda m: isinstance(m.loss, SquaredError) and not m.mean,
    "a mean squared error": lambda m: isinstance(m.loss, SquaredError) and m.mean,
    "a summed softmax cross-entropy": lambda m: isinstance(m.loss, SoftmaxCrossEntropy) and not m.mean,
    "a mean softmax cross-entropy": lambda m: isinstance(m.loss, SoftmaxCrossEntropy) and m.mean,
    **{f"the elementwise function {name}": (lambda m, name=name: name in _functions(m)) for name in ACTIVATIONS},
    **{
        f"a power of a gate, sigmoid(tanh(g_t))^({e})": (lambda m, e=e: _gate_power(m, e)) for e in GATE_POWERS.values()
    },
    "two slices of a wide intermediate, a_t[:h, :] and a_t[h:2h, :]": _sliced_intermediate,
}

# The shapes of issue 28's nodes, which cells.powered_plans() draws (tests/oracle/test_latex_codegen_agree.py).
POWER_SHAPES = {
    "a transposed weight, A^T s_{t-1}": _transposed_weight,
    "a weight minus its transpose and I/4": _weight_minus_its_transpose,
    "a square SymPy folded, s_{t-1}^2": lambda m: _power(m, 2),
    "an elementwise power, (1 + s_{t-1}^2)^(-1/2)": lambda m: _power(m, sp.Rational(-1, 2)),
}
