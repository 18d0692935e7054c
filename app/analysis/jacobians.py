"""A model's derived step Jacobians evaluated on a generated module's forward pass, and the gradients the module's
own backward pass gives, for bptt analyze:
- ||dL_T/ds_t|| from the module's backward: the run from step t on is repeated with the states at t as its initial
  states, and backward gives their gradient;
- ds_T/ds_t = J_T ... J_{t+1}, the product of the derived step Jacobians (derive.flow) on the module's forward cache;
  for a cell whose step Jacobian has no closed form (a norm's adjoint), of the step Jacobians measured by
  differences of the module's one-step forward pass.
"""

import functools

import numpy as np
import sympy as sp

from bptt.codegen.backends import helpers_scope, step_printer
from bptt.derive.closed_form import k
from bptt.derive.nodes import t

STEP = step_printer(stacked=False)
DELTA = 1e-3  # a measured Jacobian's difference step, relative to the states' largest entry
NORM_SCALE = 1e-3  # the smallest scale of that step: a norm with eps = 1e-5 bends on the scale of sqrt(eps)


@functools.cache
def _helpers():
    """NumPy's helpers, defined once per process: every run's space reads them, and none writes to them."""
    return helpers_scope()


@functools.cache
def _code(expr, name):
    """The compiled NumPy code of a derived expression at step t, printed once per process (an analysis prints
    the same blocks and steps for each of its runs)."""
    return compile(STEP(expr), name, "eval")


@functools.cache
def _block_code(block, rows):
    """The code of block^T applied to the basis (rows x 1), None where that product is zero."""
    basis = sp.MatrixSymbol("basis", rows, 1)
    product = (block.T.subs(k, t) * basis).expand().doit()
    return None if product.is_ZeroMatrix else _code(product, "<derived Jacobian>")


class NoFlow(ValueError):
    """A model through which no gradient flows from step to step, or whose flow cannot be measured."""


class Blocks:
    """A block matrix over the stacked states, each block (row, col) a derived expression at step k,
    evaluated on a forward cache: the NumPy code of the block's transpose applied to a basis gives,
    in row form, the rows (B^T e_j)^T, which are the rows of the block B itself."""

    def __init__(self, states, blocks, sizes):
        self.states, self.sizes = states, sizes
        self.code = {}
        for (row, col), block in blocks.items():
            code = _block_code(block, row.rows)
            if code is not None:
                self.code[(row, col)] = code

    def at(self, step, namespace):
        """The dense block matrix at one step."""
        scope = dict(namespace, t=step)
        rows = []
        for row in self.states:
            scope["basis"] = np.eye(self.size(row))
            blocks = []
            for col in self.states:
                shape = (self.size(row), self.size(col))
                code = self.code.get((row, col))
                blocks.append(np.zeros(shape) if code is None else np.broadcast_to(eval(code, scope), shape))
            rows.append(blocks)
        return np.block(rows)

    def size(self, state):
        return self.sizes[str(state.rows)]


def step_values(flow, module, params, xs, cache, sizes):
    """What the printed Jacobians read: the parameters, the module's helpers and sizes, the states of the module's
    forward cache, and every intermediate recomputed from its equation (zero at step 0: the initial states are
    given, not computed), so that nothing depends on which intermediates the module keeps."""
    space = {
        **_helpers(),
        **vars(module),
        **params,
        "dtype": np.float64,
        **{f"n_{name}": n for name, n in sizes.items()},
    }
    space.update({seq.name: xs for seq in flow.model.inputs})
    states = {seq.name for seq in flow.model.states}
    space.update({name: cache[name] for name in states})
    batch = len(cache[flow.states[0].name][0])
    for seq, rhs in flow.model.steps:
        if seq.name in states:
            continue
        code = _code(rhs, f"<{seq.name}_t>")
        rows = 1 if seq.rows == 1 else sizes[str(seq.rows)]  # 1: a norm's mean or sigma
        values = np.zeros((len(xs) + 1, batch, rows))
        for step in range(1, len(xs) + 1):
            space["t"] = step
            values[step] = eval(code, space)
        space[seq.name] = values
    return space


def step_jacobians(flow, module, params, xs, cache, sizes):
    """[J_k for k = 1..T]: ds_k/ds_{k-1} with the states at k-1 independent, from the derived Jacobian (with
    several states, the closed form's blocks A_k transposed)."""
    blocks = flow.blocks or {(flow.states[0], flow.states[0]): flow.jacobian}
    jacobian = Blocks(flow.states, blocks, sizes)
    try:
        space = step_values(flow, module, params, xs, cache, sizes)
        return [jacobian.at(step, space) for step in range(1, len(xs) + 1)]
    except NameError as error:
        raise NoFlow(f"the derived Jacobian reads {error.name}, which bptt analyze cannot evaluate") from error


def measured_jacobians(flow, module, params, xs, ys, cache):
    """[J_k for k = 1..T] measured on the module: the one-step forward pass from the states at k-1, each entry of
    the stacked states moved by +-delta (every move a sample of one batch), central differences at delta and
    delta/2 extrapolated to a zero step (Richardson: the error is O(delta^4)). delta is DELTA times the states'
    largest entry, or DELTA * NORM_SCALE: a norm of vectors near zero bends on the scale of its sqrt(eps)."""
    sizes = [cache[s.name].shape[-1] for s in flow.states]
    stacked = sum(sizes)
    found = []
    for step in range(1, len(xs) + 1):
        start = np.concatenate([cache[s.name][step - 1][0] for s in flow.states])
        delta = DELTA * max(float(np.max(np.abs(start))), NORM_SCALE)
        moves = np.concatenate([sign * size * np.eye(stacked) for size in (delta, delta / 2) for sign in (1, -1)])
        after = _one_step(flow, module, params, xs, ys, cache, step, start + moves, sizes)
        wide, narrow = ((after[i] - after[i + 1]) / (2 * size) for i, size in ((0, delta), (2, delta / 2)))
        found.append(((4 * narrow - wide) / 3).T)  # row j: the states at k when entry j moved, column j of J_k
    return found


def _one_step(flow, module, params, xs, ys, cache, step, moved, sizes):
    """The stacked states after step `step` from each row of `moved` (the other states as in the cache), split
    into the four blocks of moves."""
    batch = len(moved)
    initial = {name: np.repeat(cache[name[:-1]][step - 1][:1], batch, axis=0) for name in module.STATES}
    for state, block in zip(flow.states, np.split(moved, np.cumsum(sizes)[:-1], axis=1), strict=True):
        initial[f"{state.name}0"] = block
    forced = (np.repeat(ys[step - 1 : step], batch, axis=1),) if module.TEACHER_FORCED else ()
    _, run = module.forward(params, np.repeat(xs[step - 1 : step], batch, axis=1), *forced, **initial)
    return np.split(np.concatenate([run[s.name][1] for s in flow.states], axis=1), 4)


def state_products(jacobians):
    """[ds_T/ds_t for t = 0..T]: J_T ... J_{t+1}, the newest step on the left (the identity at t = T)."""
    products = [np.eye(jacobians[0].shape[0])]
    for jacobian in reversed(jacobians):
        products.append(products[-1] @ jacobian)
    return products[::-1]


def state_gradients(module, params, xs, ys, states, progress=lambda: None):
    """[dL_T/ds_t for t = 0..T-1], L_T the loss of the last step and s_t the given states at t stacked.

    Each is the module's backward through the run from step t on, started from the states at t."""
    _, d_outputs, cache = module._PASSES.output_gradient(params, xs, ys, (None,) * len(module.STATES))[:3]
    last = np.zeros_like(d_outputs)
    last[-1] = d_outputs[-1]
    found = []
    for step in range(xs.shape[0]):
        initial = {name: cache[name[:-1]][step] for name in module.STATES}
        forced = (ys[step:],) if module.TEACHER_FORCED else ()
        _, run = module.forward(params, xs[step:], *forced, **initial)
        grads = module.backward(params, run, last[step:])
        found.append(np.concatenate([grads[f"{s.name}0"][0] for s in states]))
        progress()
    return found


def diagonal_products(vector, space, steps):
    """[max |prod_{k=t+1}^T v_k| for t = 0..T]: the 2-norm of the product of diag(v_k), v a column at step k
    (a carousel's gate f_k) evaluated on step_values' space."""
    code = _code(vector.subs(k, t), "<the carousel's gate>")
    values = [np.asarray(eval(code, dict(space, t=step)), dtype=float) for step in range(1, steps + 1)]
    products = [np.ones_like(values[0])]
    for value in reversed(values):
        products.append(products[-1] * value)
    return [float(np.max(np.abs(product))) for product in products[::-1]]
