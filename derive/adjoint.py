"""Symbolic reverse mode through one expression: a table of vector-Jacobian rules.

Each rule takes a node and the adjoint `g` of its value and returns the adjoints
of its arguments, written like the maths (for h = tanh(a): a_bar = diag(1 - h^2) g).
"""

import functools

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.blocks import Placed, SliceError, check_block
from bptt.derive.distribute import FACTORS, coded_factor
from bptt.derive.elementwise import Apply, UnknownFunction, derivative, power, registrations
from bptt.derive.nodes import Diag, GenericLoss, LossGrad, OneHot, SeqAt, Softmax, SoftmaxCrossEntropy, SquaredError
from bptt.derive.norms import Norm
from bptt.derive.reductions import Reduce
from bptt.derive.refusal import Refusal
from bptt.derive.text import described


class NoRule(Refusal):
    """An expression node for which no adjoint rule exists."""


def _transposed(factor):
    """factor^T; a Hadamard product or a sum stays whole, (r ⊙ h)^T, as the maths writes it."""
    return sp.Transpose(factor) if isinstance(factor, (sp.HadamardProduct, sp.MatAdd)) else factor.T


def _matmul(node, g, out):
    scalar, factors = node.as_coeff_matrices()
    grads = []
    for i, factor in enumerate(factors):
        left = [_transposed(f) for f in reversed(factors[:i])]
        right = [_transposed(f) for f in reversed(factors[i + 1 :])]
        grads.append((factor, sp.MatMul(scalar, *left, g, *right).doit(deep=False)))
    return grads


def check_products(model):
    """Refuse the first product of the model's equations (then its loss) by a matrix the generated code cannot
    multiply a vector by (distribute.FACTORS): derive and codegen both ask first, so that `bptt latex` and
    `bptt codegen` refuse the same cells with the same line."""
    for rhs in [rhs for _, rhs in model.assignments] + [model.loss]:
        for node in sp.preorder_traversal(rhs):
            if not (isinstance(node, sp.MatMul) and node.shape[1] == 1):
                continue
            factors = node.as_coeff_matrices()[1]
            for k, factor in enumerate(factors[:-1]):
                if not coded_factor(factor, before_label=isinstance(factors[k + 1], OneHot)):
                    what = f"a product by {described(factor)} has no adjoint rule yet (a factor is {FACTORS})"
                    raise NoRule(what, node)


def _matadd(node, g, out):
    return [(term, g) for term in node.args]


def _transpose(node, g, out):
    return [(node.arg, g.T)]


def _hadamard(node, g, out):
    grads = []
    for i, factor in enumerate(node.args):
        others = node.args[:i] + node.args[i + 1 :]
        other = others[0] if len(others) == 1 else sp.HadamardProduct(*others)
        grads.append((factor, Diag(other) * g))
    return grads


def _apply(node, g, out):
    try:
        slope = derivative(node, out)
    except UnknownFunction as error:
        raise NoRule(str(error), node) from error
    if isinstance(slope, sp.ZeroMatrix):  # a flat function (step): nothing flows into its argument
        return []
    return [(node.arg, g if isinstance(slope, OneMatrix) else Diag(slope) * g)]  # identity: slope 1


def _power(node, g, out):
    """x^p elementwise: the adjoint of x is diag(p x^(p - 1)) g, as for any elementwise function."""
    try:
        slope = power(node.exp).derivative(node.base, out)
    except UnknownFunction as error:
        raise NoRule(str(error), node) from error
    return [(node.base, g if isinstance(slope, OneMatrix) else Diag(slope) * g)]


def _reduce(node, g, out):
    """A reduction over the units, mean(v) or sum(v): v's adjoint is g broadcast over its rows (/n for a mean)."""
    return [(node.arg, node.reduction.adjoint(node.arg, g))]


def _norm(node, g, out):
    """A norm the model did not name the parts of: through its expression."""
    return [(node.inline(), g)]


def _slice(node, g, out):
    """A slice of a parameter or of a sequence's value: its adjoint lands in its block of the parameter's gradient
    (its rows of dL/da_t)."""
    try:
        check_block(node)
    except SliceError as error:
        raise NoRule(error.what, node) from error
    return [(node.parent, Placed(g, node))]


def _squared_error(node, g, out):
    return [(node.prediction, g * (node.prediction - node.target))]


def _softmax_cross_entropy(node, g, out):
    logits, label = node.prediction, node.target
    return [(logits, g * (Softmax(logits) - OneHot(label, logits.shape[0])))]


def _generic_loss(node, g, out):
    return [(node.prediction, g * LossGrad(node))]


RULES = {
    sp.MatMul: _matmul,
    sp.MatAdd: _matadd,
    sp.Transpose: _transpose,
    sp.HadamardProduct: _hadamard,
    Apply: _apply,
    sp.HadamardPower: _power,
    sp.MatrixSlice: _slice,
    Reduce: _reduce,
    Norm: _norm,
    SquaredError: _squared_error,
    SoftmaxCrossEntropy: _softmax_cross_entropy,
    GenericLoss: _generic_loss,
}

LEAVES = (SeqAt, sp.MatrixSymbol)
CONSTANTS = (OneMatrix, sp.ZeroMatrix, sp.Identity, OneHot)  # data: no gradient flows into a label


def _diag_split(expr):
    """c diag(u) rest -> (c u, rest), or None."""
    if not isinstance(expr, sp.MatMul):
        return None
    coeff, factors = expr.as_coeff_matrices()
    if len(factors) < 2 or not isinstance(factors[0], Diag):
        return None
    return coeff * factors[0].vector, sp.MatMul(*factors[1:]).doit(deep=False)


def _add(a, b):
    """a + b, with diag(u) g + diag(v) g merged into diag(u + v) g."""
    split_a, split_b = _diag_split(a), _diag_split(b)
    if split_a and split_b and split_a[1] == split_b[1]:
        return Diag(split_a[0] + split_b[0]) * split_a[1]
    return a + b


def backprop(expr, g, out=None):
    """Adjoints of the leaves (sequence values, parameters) of expr, given g = dL/d expr.

    `out` is the name of expr's value (e.g. h_t for tanh(a_t)), used by rules
    that write derivatives in terms of the output. Returns {leaf: adjoint}.
    """
    return dict(_leaf_adjoints(expr, g, expr if out is None else out, registrations()))


@functools.lru_cache(maxsize=4096)  # a document derives a cell three ways, each asking of the same equations
def _leaf_adjoints(expr, g, out, registered):
    """backprop's answer as (leaf, adjoint) pairs in the order the walk found them; `registered` (the
    registry's count) is in the key, so that after a function is registered again expr is derived again."""
    grads = {}
    _backprop(expr, g, out, grads)
    return tuple(grads.items())


def _backprop(node, g, out, grads):
    if isinstance(node, LEAVES):
        grads[node] = _add(grads[node], g) if node in grads else g
        return
    if isinstance(node, CONSTANTS) or not node.free_symbols:
        return
    rule = RULES.get(type(node))
    if rule is None:
        raise NoRule(f"{described(node)} has no adjoint rule yet", node)
    for child, child_g in rule(node, g, out):
        _backprop(child, child_g, child, grads)
