"""The model unrolled for a concrete number of steps, with explicit SymPy matrices.

Used by the proofs: the unrolled loss is differentiated by brute force, and the
derived formulas are evaluated on the same matrices.
"""

import functools

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.blocks import Placed
from bptt.derive.direction import FORWARD, sweeps
from bptt.derive.elementwise import Apply, lookup
from bptt.derive.nodes import Adj, Diag, OneHot, Softmax, SoftmaxCrossEntropy, SquaredError, T, TimeProduct, TimeSum, t
from bptt.derive.norm_adjoint import NormAdjoint
from bptt.derive.norms import Norm
from bptt.derive.reductions import Reduce


def evaluate(expr, env, steps):
    """expr with T = steps, sums over time expanded and env's values substituted.

    env maps parameters, sequence values (SeqAt, Adj) and size symbols to
    explicit matrices and numbers."""
    return explicit(expand_over_time(expr.subs(T, steps)).xreplace(env))


def expand_over_time(expr):
    """Expand sums and products over time with concrete bounds, outermost first."""
    while True:
        concrete = [
            e
            for e in sp.preorder_traversal(expr)
            if isinstance(e, (TimeSum, TimeProduct)) and e.start.is_Integer and e.end.is_Integer
        ]
        if not concrete:
            return expr
        expr = expr.xreplace({concrete[0]: concrete[0].doit(deep=False)})


def explicit(node):
    """An explicit ImmutableMatrix (or scalar) for a node whose leaves are explicit."""
    if isinstance(node, sp.MatrixBase):
        return sp.ImmutableMatrix(node)
    rule = EXPLICIT.get(type(node))
    if rule is not None:
        return rule(node)
    if isinstance(node, sp.MatrixExpr):
        raise ValueError(f"cannot make {type(node).__name__} explicit: {node}")
    return node


def _matmul(node):
    scalar, factors = node.as_coeff_matrices()
    product = explicit(factors[0])
    for factor in factors[1:]:
        product = product * explicit(factor)
    return sp.ImmutableMatrix(scalar * product)


def _ones(node):
    return sp.ImmutableMatrix(sp.ones(*(int(n) for n in node.shape)))


def _softmax(node):
    exps = explicit(node.arg).applyfunc(sp.exp)
    return exps / sum(exps)


def _onehot(node):
    vector = sp.zeros(int(node.shape[0]), 1)
    vector[int(node.label)] = 1
    return sp.ImmutableMatrix(vector)


def _squared_error(node):
    diff = explicit(node.prediction) - explicit(node.target)
    return sum(e**2 for e in diff) / 2


def _softmax_cross_entropy(node):
    logits = explicit(node.prediction)
    return -logits[int(node.target)] + sp.log(sum(sp.exp(e) for e in logits))


def _block(node):
    rows, columns = (slice(int(bounds[0]), int(bounds[1])) for bounds in (node.rowslice, node.colslice))
    return explicit(node.parent)[rows, columns]


def _placed(node):
    whole = sp.zeros(*(int(n) for n in node.shape))
    rows, columns = (int(bounds[0]) for bounds in (node.block.rowslice, node.block.colslice))
    whole[rows : rows + int(node.value.shape[0]), columns : columns + int(node.value.shape[1])] = explicit(node.value)
    return sp.ImmutableMatrix(whole)


EXPLICIT = {
    sp.MatAdd: lambda n: sp.ImmutableMatrix(sum((explicit(a) for a in n.args[1:]), explicit(n.args[0]))),
    sp.MatMul: _matmul,
    sp.Transpose: lambda n: explicit(n.arg).T,
    sp.HadamardProduct: lambda n: sp.ImmutableMatrix(
        functools.reduce(lambda a, b: a.multiply_elementwise(b), (explicit(a) for a in n.args))
    ),
    sp.HadamardPower: lambda n: explicit(n.base).applyfunc(lambda e: e**n.exp),
    sp.MatPow: lambda n: explicit(n.base) ** int(n.exp),
    OneMatrix: _ones,
    sp.ZeroMatrix: lambda n: sp.ImmutableMatrix(sp.zeros(*(int(k) for k in n.shape))),
    sp.Identity: lambda n: sp.ImmutableMatrix(sp.eye(int(n.shape[0]))),
    Diag: lambda n: sp.ImmutableMatrix(sp.diag(*explicit(n.vector))),
    Apply: lambda n: explicit(n.arg).applyfunc(lookup(n.function).scalar),
    sp.MatrixSlice: _block,
    Placed: _placed,
    Reduce: lambda n: sp.ImmutableMatrix([[n.reduction.scalar(list(explicit(n.arg)))]]),
    Norm: lambda n: explicit(n.inline()),
    NormAdjoint: lambda n: explicit(n.expanded()),
    Softmax: _softmax,
    OneHot: _onehot,
    SquaredError: _squared_error,
    SoftmaxCrossEntropy: _softmax_cross_entropy,
}


def unroll(model, steps, env, loss=None):
    """Run the model forward: env holds parameters, initial states (time 0, or steps + 1 for a
    reverse-time state), inputs and targets at times 1..steps; fills in every assigned value,
    sweep by sweep, and returns the total loss L. Teacher-forced states take their data."""
    loss = model.concrete_loss() if loss is None else loss
    per_step = []
    forced = model.forced
    for sweep in sweeps(model):
        for k in sweep.times(steps):
            for seq, rhs in sweep.steps:
                env[seq(k)] = evaluate(forced.get(seq, rhs).subs(t, k), env, steps)
    for k in range(1, steps + 1):
        for seq, rhs in model.outputs:
            env[seq(k)] = evaluate(rhs.subs(t, k), env, steps)
        per_step.append(evaluate(loss.subs(t, k), env, steps))
    total = sum(per_step)
    return total / steps if model.mean else total


def backward(derivation, steps, env):
    """Evaluate the derived adjoints into env: the last sweep first, each sweep's steps in the
    reverse of its order (a forward sweep's last step first, a reverse sweep's first step first).

    Returns {name: value} for every parameter gradient and each initial state ("h0").
    """
    model = derivation.model
    for seq, value in derivation.output_adjoints.items():
        for k in range(1, steps + 1):
            env[Adj(seq(k))] = evaluate(value.subs(t, k), env, steps)
    for sweep in reversed(sweeps(model)):
        last = steps if sweep.direction == FORWARD else 1
        for k in reversed(sweep.times(steps)):
            _adjoints_at(derivation, [seq for seq, _ in reversed(sweep.steps)], k, k == last, env, steps)
    grads = {f"{seq.name}0": evaluate(derivation.initial(seq), env, steps) for seq in model.states}
    for param in model.params:
        grads[param.name] = evaluate(derivation.param_gradient(param), env, steps)
    return grads


def _adjoints_at(derivation, order, k, last, env, steps):
    """The named adjoints of one step k of one sweep, into env."""
    for seq in order:
        if seq in derivation.model.forced:
            continue
        if seq.role == "state":
            formula = derivation.terminal(seq) if last else derivation.recursion(seq).subs(t, k)
        elif seq in derivation.named:
            formula = derivation.intermediate(seq).subs(t, k)
        else:
            continue
        env[Adj(seq(k))] = evaluate(formula, env, steps)
