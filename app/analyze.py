"""Measure gradient flow through time with a model's generated module and its derived Jacobians.

On one random sequence (batch 1), with the recurrent weights scaled to several spectral radii:
- ||dL_T/ds_t|| against T - t, from the module's own backward pass: the run from step t on is
  repeated with the states at t as its initial states, and backward gives their gradient;
- ||ds_T/ds_t|| for each state, the product J_T ... J_{t+1} of the derived step Jacobians
  (derive.flow) evaluated on the module's forward cache, and the bound (gamma sigma_max(W))^(T-t)
  where the Jacobian has that form;
- the eigenvalues of the recurrent matrices; the gradient's norm before and after clip_grads.
And d2l's exercise: |cos(M^k x, v_1)| for the symmetric part M of the first recurrent matrix.
"""

import math
from dataclasses import dataclass

import numpy as np
import sympy as sp

from bptt.app.check import load_module
from bptt.app.plots import Table
from bptt.codegen.printing.helpers import namespace
from bptt.codegen.printing.printer import RowPrinter
from bptt.derive.closed_form import k
from bptt.derive.flow import gradient_flow
from bptt.derive.models import ZOO
from bptt.derive.nodes import t

SIZE = 8  # every size of the model (d, h, q, ...)
RADII = (0.5, 1.0, 1.5)
STEPS = 40
THETA = 1.0  # the clipping threshold
STEP = RowPrinter(stacked=False)
ALIGN, CLIP = ("k", "cos", "tan", "bound"), ("radius", "norm", "clipped", "theta")
TABLES = ("gradient_norms", "eigenvalues", "alignment", "clipping")  # the tables of an Analysis, in order


class NoFlow(ValueError):
    """A model through which no gradient flows from step to step, or whose flow cannot be measured."""


@dataclass(frozen=True)
class Analysis:
    model: str
    steps: int
    seed: int
    radii: tuple
    theta: float
    tables: tuple

    def table(self, name):
        """The table called name, one of TABLES; ValueError naming them otherwise."""
        found = [table for table in self.tables if table.name == name]
        if not found:
            raise ValueError(f"no table {name!r}; the tables are {', '.join(table.name for table in self.tables)}")
        return found[0]


class Blocks:
    """A block matrix over the stacked states, each block (row, col) a derived expression at step k,
    evaluated on a forward cache: the NumPy code of the block's transpose applied to a basis gives,
    in row form, the rows (B^T e_j)^T, which are the rows of the block B itself."""

    def __init__(self, states, blocks, sizes):
        self.states, self.sizes = states, sizes
        self.code = {}
        for (row, col), block in blocks.items():
            basis = sp.MatrixSymbol("basis", row.rows, 1)
            product = (block.T.subs(k, t) * basis).expand().doit()
            if not product.is_ZeroMatrix:
                self.code[(row, col)] = compile(STEP(product), "<derived Jacobian>", "eval")

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
    space = {**namespace(), **vars(module), **params, "dtype": np.float64, **{f"n_{name}": n for name, n in sizes.items()}}
    space.update({seq.name: xs for seq in flow.model.inputs})
    states = {seq.name for seq in flow.model.states}
    space.update({name: cache[name] for name in states})
    batch = len(cache[flow.states[0].name][0])
    for seq, rhs in flow.model.steps:
        if seq.name in states:
            continue
        code = compile(STEP(rhs), f"<{seq.name}_t>", "eval")
        values = np.zeros((len(xs) + 1, batch, sizes[str(seq.rows)]))
        for step in range(1, len(xs) + 1):
            space["t"] = step
            values[step] = eval(code, space)
        space[seq.name] = values
    return space


def step_jacobians(flow, module, params, xs, cache, sizes):
    """[J_k for k = 1..T]: ds_k/ds_{k-1} with the states at k-1 independent, from the derived Jacobian.

    With several states the closed form's blocks give the Jacobian between perturbations of the states
    as computed (a change of c_k moves h_k = o_k * tanh(c_k) with it); with the same-step couplings S_k
    the states' own Jacobian is (I - S_k)^-1 J_k (I - S_{k-1})."""
    blocks = flow.blocks or {(flow.states[0], flow.states[0]): flow.jacobian}
    jacobian, coupling = Blocks(flow.states, blocks, sizes), Blocks(flow.states, flow.couplings, sizes)
    steps = len(xs)
    try:
        space = step_values(flow, module, params, xs, cache, sizes)
        found = [jacobian.at(step, space) for step in range(1, steps + 1)]
        eye = np.eye(found[0].shape[0])
        free = [eye - coupling.at(step, space) for step in range(steps + 1)] if flow.couplings else None
    except NameError as error:
        raise NoFlow(f"the derived Jacobian reads {error.name}, which bptt analyze cannot evaluate") from error
    if free is None:
        return found
    return [np.linalg.solve(free[step], found[step - 1] @ free[step - 1]) for step in range(1, steps + 1)]


def state_products(jacobians):
    """[ds_T/ds_t for t = 0..T]: J_T ... J_{t+1}, the newest step on the left (the identity at t = T)."""
    products = [np.eye(jacobians[0].shape[0])]
    for jacobian in reversed(jacobians):
        products.append(products[-1] @ jacobian)
    return products[::-1]


def state_gradients(module, params, xs, ys, states, progress=lambda: None):
    """[dL_T/ds_t for t = 0..T-1], L_T the loss of the last step and s_t the given states at t stacked.

    Each is the module's backward through the run from step t on, started from the states at t."""
    _, d_outputs, cache = module._loss_and_output_gradient(params, xs, ys, *[None] * len(module.STATES))
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


def scaled(params, recurrent, radius):
    """params with every recurrent matrix scaled to the given spectral radius."""
    out = dict(params)
    for p in recurrent:
        out[p.name] = params[p.name] * (radius / np.max(np.abs(np.linalg.eigvals(params[p.name]))))
    return out


def bound_values(bound, params, distances):
    """(gamma prod sigma_max(W))^(T-t) for each distance T - t."""
    base = float(bound.gamma) * math.prod(float(np.linalg.norm(params[w.name], 2)) for w in bound.matrices)
    return [base**distance for distance in distances]


def alignment(matrix, x, steps):
    """Rows (k, |cos(M^k x, v_1)|, tan of the angle, (|l2|/|l1|)^k tan of the angle at k = 0) for a symmetric M,
    v_1 the eigenvector of the eigenvalue l1 largest in modulus (l2 the next)."""
    values, vectors = np.linalg.eigh(matrix)
    order = np.argsort(-np.abs(values))
    ratio = abs(values[order[1]]) / abs(values[order[0]])
    v1 = vectors[:, order[0]]
    y = x / np.linalg.norm(x)
    rows, tan0 = [], None
    for power in range(steps + 1):
        along = float(y @ v1)
        tan = float(np.linalg.norm(y - along * v1)) / abs(along)
        tan0 = tan if tan0 is None else tan0
        rows.append((power, abs(along), tan, ratio**power * tan0))
        y = matrix @ y
        y = y / np.linalg.norm(y)
    return rows, ratio


def global_norm(grads):
    return math.sqrt(sum(float(np.sum(g**2)) for g in grads.values()))


def analyze(model, steps=STEPS, seed=0, radii=RADII, theta=THETA, progress=None):
    """The Analysis of a model: four tables, one per plot. progress(done, total) is called as the runs go."""
    flow = gradient_flow(model)
    if not flow.states:
        raise NoFlow(f"{model.name}: teacher forcing makes every state data, so no gradient flows between steps")
    recurrent = [p for p in flow.recurrent if p.shape[0] == p.shape[1]]  # a radius needs a square matrix
    if not recurrent:
        raise NoFlow(f"{model.name}: no square matrix multiplies a state read at t-1, so there is no radius to scale")
    module = load_module(model, from_zoo=not model.spec and model.name in ZOO)
    sizes = {name: SIZE for name in module.SIZES}
    rng = np.random.default_rng(seed)
    base = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, steps, 1, **sizes)
    ticks = iter(range(1, len(radii) * steps + 1))

    def tick():
        done = next(ticks)
        if progress:
            progress(done, len(radii) * steps)

    norms, eigen, clipping = [], [], []
    for radius in radii:
        params = scaled(base, recurrent, radius)
        norms += _norm_rows(flow, module, params, xs, ys, sizes, radius, tick)
        for p in recurrent:
            for value in sorted(np.linalg.eigvals(params[p.name]), key=lambda v: (-abs(v), v.real, v.imag)):
                eigen.append((radius, p.name, float(value.real), float(value.imag), float(abs(value))))
        _, grads = module.loss_and_grads(params, xs, ys)
        clipping.append((radius, global_norm(grads), global_norm(module.clip_grads(grads, theta)), theta))
    name = recurrent[0].name
    symmetric = (base[name] + base[name].T) / 2
    aligned, ratio = alignment(symmetric, rng.standard_normal(symmetric.shape[0]), steps)
    tables = (
        _norm_table(flow, norms),
        Table("eigenvalues", "Eigenvalues of the recurrent matrices", ("radius", "matrix", "re", "im", "abs"), eigen),
        Table(
            "alignment",
            f"|cos(M^k x, v1)| for M = ({name} + {name}^T)/2, |lambda2/lambda1| = {ratio:.4g}",
            ALIGN,
            aligned,
        ),
        Table("clipping", f"Gradient norm before and after clip_grads (theta = {theta:g})", CLIP, clipping),
    )
    return Analysis(model.name, steps, seed, tuple(radii), theta, tables)


def _norm_rows(flow, module, params, xs, ys, sizes, radius, tick):
    """Rows (radius, T - t, ||dL_T/ds_t||, ||ds_T/ds_t|| of each state, [bound]) for T - t = 1..T."""
    gradients = state_gradients(module, params, xs, ys, flow.states, tick)
    _, _, cache = module._loss_and_output_gradient(params, xs, ys, *[None] * len(module.STATES))
    products = state_products(step_jacobians(flow, module, params, xs, cache, sizes))
    steps = len(xs)
    distances = list(range(1, steps + 1))
    bounds = bound_values(flow.bound, params, distances) if flow.bound else [None] * steps
    rows = []
    for distance, bound in zip(distances, bounds, strict=True):
        blocks = _diagonal_block_norms(flow, products[steps - distance], sizes)
        norm = float(np.linalg.norm(gradients[steps - distance]))
        rows.append((radius, distance, norm, *blocks, *([bound] if flow.bound else [])))
    return rows


def _diagonal_block_norms(flow, product, sizes):
    """||ds_T/ds_t||_2 of each state s: the diagonal blocks of the stacked product."""
    out, start = [], 0
    for state in flow.states:
        end = start + sizes[str(state.rows)]
        out.append(float(np.linalg.norm(product[start:end, start:end], 2)))
        start = end
    return out


def _norm_table(flow, rows):
    names = [s.name for s in flow.states]
    stacked = names[0] if len(names) == 1 else "s"
    columns = ("radius", "T-t", f"|dL_T/d{stacked}_t|", *(f"|d{n}_T/d{n}_t|" for n in names))
    columns += ("bound",) if flow.bound else ()
    return Table("gradient_norms", "Gradient norms against the distance T - t", columns, rows)
