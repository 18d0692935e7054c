"""Check a generated module's gradients against central finite differences."""

import importlib
import types
from dataclasses import dataclass

import numpy as np

from .render import module_filename, module_source

TOLERANCE = {"float64": 1e-7, "float32": 1e-3}
MAX_ENTRIES = 40  # finite differences on at most this many entries per array


@dataclass(frozen=True)
class Row:
    name: str
    error: float
    tolerance: float

    @property
    def ok(self):
        return self.error <= self.tolerance


def load_module(model):
    """generated/<model>.py for a zoo model, or the module rendered in memory for a user's model."""
    try:
        return importlib.import_module(f"generated.{module_filename(model)[:-3]}")
    except ModuleNotFoundError:
        module = types.ModuleType(model.name.replace("-", "_"))
        exec(compile(module_source(model), f"<bptt {model.name}>", "exec"), module.__dict__)
        return module


def default_sizes(module):
    """Distinct small sizes (3, 4, 5, ...) so that a transposed shape cannot pass."""
    return {name: 3 + i for i, name in enumerate(module.SIZES)}


def relative_error(analytic, numeric):
    """max |a - n| / max(|a|, |n|), where entries below 1e-3 of the array's largest
    are measured against that 1e-3 (finite differences cannot resolve them better)."""
    floor = 1e-3 * max(np.abs(numeric).max(), np.abs(analytic).max(), 1e-30)
    denominator = np.maximum(np.maximum(np.abs(analytic), np.abs(numeric)), floor)
    return float((np.abs(analytic - numeric) / denominator).max())


# Fourth-order central differences: f'(x) = (-f(x+2e) + 8 f(x+e) - 8 f(x-e) + f(x-2e)) / 12e + O(e^4).
STENCIL = ((2, -1), (1, 8), (-1, -8), (-2, 1))


def numeric_gradient(loss, array, entries, eps=1e-3):
    """Central differences of loss() with respect to the given entries of array (restored afterwards)."""
    out = np.zeros(len(entries))
    for n, index in enumerate(entries):
        saved = array[index]
        total = 0.0
        for step, weight in STENCIL:
            array[index] = saved + step * eps
            total += weight * loss()
        array[index] = saved
        out[n] = total / (12 * eps)
    return out


def check(module, steps=5, batch=3, seed=0, dtype="float64", sizes=None):
    """One Row per parameter and initial state: analytic (in dtype) against
    central differences of the float64 loss."""
    rng = np.random.default_rng(seed)
    sizes = sizes or default_sizes(module)
    params = module.init_params(rng, np.float64, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, np.float64, **sizes)
    initial = {name: 0.5 * rng.standard_normal((batch, sizes[size])) for name, size in module.STATES.items()}
    low = np.dtype(dtype)
    cast = {k: v.astype(low) for k, v in params.items()}
    xs_low, ys_low = (a.astype(low) if np.issubdtype(a.dtype, np.floating) else a for a in (xs, ys))
    _, grads = module.loss_and_grads(cast, xs_low, ys_low, **{k: v.astype(low) for k, v in initial.items()})
    arrays = {**params, **initial}

    def loss():
        return module.loss_and_grads(params, xs, ys, **initial)[0]

    rows = []
    for name, array in arrays.items():
        flat = list(np.ndindex(array.shape))
        picks = rng.permutation(len(flat))[:MAX_ENTRIES]
        entries = [flat[i] for i in sorted(picks)]
        numeric = numeric_gradient(loss, array, entries)
        analytic = np.array([grads[name][index] for index in entries], dtype=np.float64)
        rows.append(Row(name, relative_error(analytic, numeric), TOLERANCE[dtype]))
    return rows


def table(rows):
    lines = [f"{'parameter':<12}{'max rel. error':>16}  verdict"]
    for row in rows:
        lines.append(f"{row.name:<12}{row.error:>16.2e}  {'ok' if row.ok else 'FAIL'} (tolerance {row.tolerance:.0e})")
    return "\n".join(lines)
