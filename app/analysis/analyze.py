"""Measure gradient flow through time with a model's generated module and its derived Jacobians.

On one random sequence (batch 1), with the recurrent weights scaled to several spectral radii (by default 0.5, 1,
1.5 and, if the gradient grows at none of them, a larger one where it does), in a regime where the cell's
activations stay nearly linear (app/analysis/regime.py):
- ||dL_T/ds_t|| and ||ds_T/ds_t|| for each state against T - t (app/analysis/jacobians.py: the step Jacobians derived,
  or measured where they have no closed form, as a norm's adjoint has none), and the upper bound
  (gamma sigma_max(W))^(T-t) where the Jacobian has that form; for a cell that saturates, the same at input scale 1
  (the module's own initialisation) too;
- the eigenvalues of the recurrent matrices (of each square block of a stack such as W_h of 4h x h); the gradient's
  norm before and after clipping at g_max;
- d2l's exercise: |cos(M^k x, v_1)| for the symmetric part M of the first recurrent matrix;
- for a cell with a constant error carousel (the LSTM's c_t = f_t * c_{t-1} + ...): ||dc_T/dc_t|| and the
  carousel's own product of diag(f_k), with the gate's bias at 0, 1 and 5.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from bptt.app.analysis.clipping import clipping_table
from bptt.app.analysis.defaults import RADII, SIZE, STEPS
from bptt.app.analysis.jacobians import NoFlow, diagonal_products, state_gradients, state_products, step_values
from bptt.app.analysis.regime import CAROUSEL_BIASES, GATE_BIAS, block_names, regime, saturates
from bptt.app.analysis.runs import deviation, jacobians_at, regime_words, setup
from bptt.app.analysis.table import Table, symbol
from bptt.derive.flow import gradient_flow
from bptt.derive.nodes import T, t
from bptt.documents.carousel_document import direct_name, every_path_name

__all__ = ["CAROUSEL", "RADII", "SATURATED", "SIZE", "STEPS", "TABLES", "Analysis", "NoFlow"]
__all__ += ["analyze", "deviation", "setup", "table_names"]  # setup and deviation: the regime tests'

TABLES = ("gradient_norms", "eigenvalues", "alignment", "clipping")  # the tables of every Analysis, in order
SATURATED = "gradient_norms_saturated"  # after gradient_norms, for a cell that saturates with no scale given
CAROUSEL = "carousel"  # the fifth table, for a cell with a constant error carousel


@dataclass(frozen=True)
class Analysis:
    model: str
    steps: int
    seed: int
    radii: tuple
    g_max: float  # the clipping threshold (the documents' g_max)
    scale: float  # the factor on the cell's input weights and biases (regime.py)
    tables: tuple

    def table(self, name):
        """The table called name, one of TABLES (or CAROUSEL); ValueError naming them otherwise."""
        found = [table for table in self.tables if table.name == name]
        if not found:
            raise ValueError(f"no table {name!r}; the tables are {', '.join(table.name for table in self.tables)}")
        return found[0]


def table_names(model, scale=None):
    """The tables an analysis of the model writes, in order."""
    plan = regime(gradient_flow(model, measured=True))
    names = TABLES[:1] + ((SATURATED,) if scale is None and saturates(model) else ()) + TABLES[1:]
    return names + ((CAROUSEL,) if plan.carousel else ())


def bound_values(bound, params, distances):
    """(gamma prod sigma_max(W))^(T-t) for each distance T - t; inf past the largest float (a long T's growth)."""
    base = float(bound.gamma) * math.prod(float(np.linalg.norm(params[w.name], 2)) for w in bound.matrices)
    with np.errstate(over="ignore"):
        return np.power(base, np.asarray(distances, dtype=np.float64)).tolist()


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


def analyze(model, steps=STEPS, seed=0, radii=None, g_max=None, scale=None, progress=None):
    """The Analysis of a model: a table per plot. radii None: RADII and a radius where the gradient grows (setup).
    g_max the clipping threshold (None: between the smallest and the largest measured norm). scale multiplies the
    cell's input weights and biases (None: small enough that the activations stay nearly linear, and input scale 1
    too for a cell that saturates). progress(done, total) is called as the runs go."""
    found, rng = setup(model, steps, seed, None if radii is None else tuple(radii), scale)
    radii = found.radii
    saturated = replace(found, regime=replace(found.regime, scale=1.0))
    regimes = [found] + ([saturated] if scale is None and saturates(model) else [])
    total = len(regimes) * len(radii) * steps
    ticks = iter(range(1, total + 1))

    def tick():
        done = next(ticks)
        if progress:
            progress(done, total)

    words = regime_words(found, radii)
    norms = [
        _norm_table(each, [row for radius in radii for row in _norm_rows(each, radius, tick)], name)
        for each, name in zip(regimes, ("gradient_norms", SATURATED), strict=False)
    ]
    eigen, gradients = [], {}
    for radius in radii:
        params = found.params(radius)
        for p in found.recurrent:
            for name, rows in block_names(p.name, params[p.name]).items():
                for value in sorted(np.linalg.eigvals(params[p.name][rows]), key=lambda v: (-abs(v), v.real, v.imag)):
                    eigen.append((radius, name, float(value.real), float(value.imag), float(abs(value))))
        gradients[radius] = found.module.loss_and_grads(params, found.xs, found.ys)[1]
    first = found.recurrent[0].name
    name, rows = next(iter(block_names(first, found.base[first]).items()))
    symmetric = (found.base[first][rows] + found.base[first][rows].T) / 2
    aligned, ratio = alignment(symmetric, rng.standard_normal(symmetric.shape[0]), steps)
    top = float(max(abs(np.linalg.eigvalsh(symmetric))))
    clipping = clipping_table(found.module, gradients, g_max, words)
    tables = (
        *norms,
        Table(
            "eigenvalues",
            f"Eigenvalues of the recurrent matrices ({words})",
            ("radius", "matrix", "re", "im", "abs"),
            eigen,
            ("radius", "matrix", r"$\mathrm{Re}\,\lambda$", r"$\mathrm{Im}\,\lambda$", r"$|\lambda|$"),
            regime=words,
        ),
        _alignment_table(name, ratio, aligned, f"no input, M from the initial {name}, spectral radius {top:.3g}"),
        clipping,
    )
    tables += (_carousel_table(found, min(radii)),) if found.regime.carousel else ()
    return Analysis(model.name, steps, seed, tuple(radii), clipping.rows[0][3], found.regime.scale, tables)


def _norm_rows(found, radius, tick):
    """Rows (radius, T - t, ||dL_T/ds_t||, ||ds_T/ds_t|| of each state, [bound]) for T - t = 1..T."""
    flow, steps, params = found.flow, len(found.xs), found.params(radius)
    gradients = state_gradients(found.module, params, found.xs, found.ys, flow.states, tick)
    products = state_products(jacobians_at(found, params))
    distances = list(range(1, steps + 1))
    bounds = bound_values(flow.bound, params, distances) if flow.bound else [None] * steps
    rows = []
    for distance, bound in zip(distances, bounds, strict=True):
        blocks = _diagonal_block_norms(flow, products[steps - distance], found.sizes)
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


def _regime_note(found):
    """The gate's bias the runs set, in words; empty if they set none (regime_words gives the input scale)."""
    plan, notes = found.regime, []
    if plan.biases:
        notes.append(f"the bias of {plan.carousel.direct.vector.name} at {GATE_BIAS:g}")
    return f" ({'; '.join(notes)})" if notes else ""


def _norm_table(found, rows, table_name):
    flow, radii, words = found.flow, found.radii, regime_words(found, found.radii)
    names = [s.name for s in flow.states]
    if len(names) == 1:
        gradient, label = f"|dL_T/d{names[0]}_t|", rf"$\|\partial L_T/\partial {symbol(names[0])}_t\|$"
    else:  # the states stacked
        gradient = f"|dL_T/d({','.join(f'{n}_t' for n in names)})|"
        label = rf"$\|\partial L_T/\partial({','.join(f'{symbol(n)}_t' for n in names)})\|$"
    columns = ("radius", "T-t", gradient, *(f"|d{n}_T/d{n}_t|" for n in names))
    labels = ("radius", "$T-t$", label, *(rf"$\|\partial {symbol(n)}_T/\partial {symbol(n)}_t\|$" for n in names))
    title = f"Gradient norms against the distance T - t, {words}{_regime_note(found)}"
    title += "; ds_T/ds_t from step Jacobians measured by differences (no closed form)" if flow.measured else ""
    if flow.bound:
        columns += ("upper_bound",)
        weights = r"\,".join(rf"\sigma_{{\max}}({symbol(w.name)})" for w in flow.bound.matrices)
        labels += (rf"upper bound $(\gamma\,{weights})^{{T-t}}$, $\gamma = {flow.bound.gamma}$",)
        title += _looseness(found, radii)
    return Table(table_name, title, columns, rows, labels, regime=words)


def _looseness(found, radii):
    """Why the upper bound is loose: sigma_max of each recurrent matrix exceeds its spectral radius (unless normal)."""
    parts = []
    for w in found.flow.bound.matrices:
        top = [float(np.linalg.norm(found.params(r)[w.name], 2)) for r in radii]
        parts.append(
            f"sigma_max({w.name}) = {', '.join(f'{s:.3g}' for s in top)} at radii {', '.join(f'{r:g}' for r in radii)}"
        )
    return "; the upper bound uses " + "; ".join(parts)


def _alignment_table(name, ratio, rows, words):
    m = r"\mathbf{M}"
    return Table(
        "alignment",
        f"|cos(M^k x, v1)| for M = ({name} + {name}^T)/2, |lambda2/lambda1| = {ratio:.4g} ({words})",
        ("k", "cos", "tan", "upper_bound"),
        rows,
        (
            "$k$",
            rf"$|\cos\angle({m}^k \mathbf{{x}}, \mathbf{{v}}_1)|$",
            rf"$\tan\angle({m}^k \mathbf{{x}}, \mathbf{{v}}_1)$",
            r"upper bound $(|\lambda_2|/|\lambda_1|)^k \tan\angle(\mathbf{x}, \mathbf{v}_1)$",
        ),
        regime=words,
    )


def _carousel_table(found, radius):
    """Rows (gate bias, T - t, ||D_T ... D_{t+1}||, ||Phi_{T,t}||, rho(A_1)) at the radius, for each of
    CAROUSEL_BIASES: D_k = diag(f_k) the state's direct Jacobian, Phi_{T,t} its block of the product of the step
    Jacobians A_k (every path, through the other states too), and rho(A_1) the first step's spectral radius, by
    which every path grows (or shrinks) per step: above 1 where f_k is near 1 and the other states feed back."""
    flow, carousel, steps = found.flow, found.regime.carousel, len(found.xs)
    index = flow.states.index(carousel.state)
    rows = []
    for bias in CAROUSEL_BIASES:
        params = found.params(radius, bias)
        cache = found.cache(params)
        space = step_values(flow, found.module, params, found.xs, cache, found.sizes)
        path = diagonal_products(carousel.direct.vector, space, steps)
        jacobians = jacobians_at(found, params)
        products, step = state_products(jacobians), float(max(abs(np.linalg.eigvals(jacobians[0]))))
        for distance in range(1, steps + 1):
            blocks = _diagonal_block_norms(flow, products[steps - distance], found.sizes)
            rows.append((bias, distance, path[steps - distance], blocks[index], step))
    gate, state = carousel.direct.vector.name, carousel.state.name
    words = regime_words(found, (radius,))
    return Table(
        CAROUSEL,
        f"The constant error carousel through {state}: the biases of {gate} summing to "
        f"{', '.join(f'{b:g}' for b in CAROUSEL_BIASES)} ({words})",
        ("gate_bias", "T-t", f"prod {gate}_k", f"|d{state}_T/d{state}_t|", "step_radius"),
        rows,
        (
            "$" + " + ".join(f"b_{{{name.partition('_')[2]}}}" for name in found.regime.biases) + "$",
            "$T-t$",
            rf"the carousel $\|{direct_name(carousel.state, T)} \cdots {direct_name(carousel.state, t + 1)}\|$,"
            "\n"
            rf"${direct_name(carousel.state)} = \mathrm{{diag}}({symbol(gate)}_k)$",
            rf"every path $\|{every_path_name(carousel.state)}\|$," "\nthrough the other states too",
            r"$\rho(\mathbf{A}_k)$",
        ),
        regime=words,
    )
