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


def load_module(model, from_zoo):
    """generated/<model>.py for a zoo model, or the module rendered in memory for a user's model."""
    name = module_filename(model)[:-3]
    if from_zoo:
        try:
            return importlib.import_module(f"bptt.generated.{name}")
        except ModuleNotFoundError as error:
            raise FileNotFoundError(f"generated/{name}.py does not exist; run `bptt codegen {model.name}`") from error
    module = types.ModuleType(name)
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


# Fourth-order central differences: f'(x) = sum of weight * f(x + step e), over 12 e, + O(e^4).
STENCIL = ((2, -1), (1, 8), (-1, -8), (-2, 1))


def numeric_gradient(loss, array, entries, eps=1e-3):
    """Fourth-order central differences of loss() with respect to the given entries
    of array (restored afterwards), the STENCIL summed as differences so that an
    entry the loss does not read gets exactly 0."""
    out = np.zeros(len(entries))
    for n, index in enumerate(entries):
        saved = array[index]
        values = {}
        for step in (-2, -1, 1, 2):
            array[index] = saved + step * eps
            values[step] = loss()
        array[index] = saved
        out[n] = (8 * (values[1] - values[-1]) - (values[2] - values[-2])) / (12 * eps)
    return out


def problem(module, steps, batch, seed, sizes=None):
    """A random instance: float64 parameters, inputs, targets and initial states."""
    rng = np.random.default_rng(seed)
    sizes = sizes or default_sizes(module)
    params = module.init_params(rng, np.float64, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, np.float64, **sizes)
    initial = {name: 0.5 * rng.standard_normal((batch, sizes[size])) for name, size in module.STATES.items()}
    return Problem(module, params, xs, ys, initial).freeze()


@dataclass
class Problem:
    """A generated module with one set of arrays, and the losses that its
    full and truncated backward passes differentiate."""

    module: object
    params: dict
    xs: np.ndarray
    ys: np.ndarray
    initial: dict
    frozen: dict = None

    def forward(self, params, start, stop, initial, cache=False):
        """Outputs (or the cache) of the generated forward pass over steps start+1..stop."""
        args = (self.xs[start:stop], self.ys[start:stop]) if self.module.TEACHER_FORCED else (self.xs[start:stop],)
        return self.module.forward(params, *args, **initial)[1 if cache else 0]

    def segment(self, start, stop, detached):
        """Batch-averaged losses of steps start+1..stop.

        A detached segment starts from the state of an unperturbed full run
        at `start`, held constant; otherwise from the (perturbable) initial
        states. Teacher-forced states are data, like inputs: never detached."""
        state = dict(self.initial)
        if detached:
            frozen = self.frozen
            for key in self.module.STATES:
                if key[:-1] not in self.module.TEACHER_FORCED or start > 0:
                    state[key] = frozen[key[:-1]][start]
        outputs = self.forward(self.params, start, stop, state)
        steps = len(self.xs) if self.module.MEAN else 1
        return self.module.losses(outputs, self.ys[start:stop]).mean(axis=1) / steps

    def freeze(self):
        """Keep the states of a full run, before any perturbation, for detached segments."""
        self.frozen = self.forward(self.params, 0, len(self.xs), self.initial, cache=True)
        return self

    def loss(self, truncate=None):
        """The loss whose exact gradient backward(..., truncate) computes."""
        steps = len(self.xs)
        if truncate is None:
            return self.segment(0, steps, False).sum()
        mode, k = truncate
        if mode == "chunk":  # the state entering each chunk is detached
            return sum(self.segment(a, min(a + k, steps), a > 0).sum() for a in range(0, steps, k))
        if mode == "window":  # output j sees the state at j-k-1 (if any) as a constant
            return sum(self.segment(max(0, j - k - 1), j, j - k - 1 >= 0)[-1] for j in range(1, steps + 1))
        raise ValueError(f"no deterministic loss for truncate={truncate!r}")

    def grads(self, dtype="float64", truncate=None, rng=None):
        low = np.dtype(dtype)
        cast = {k: v.astype(low) for k, v in self.params.items()}
        xs, ys = (a.astype(low) if np.issubdtype(a.dtype, np.floating) else a for a in (self.xs, self.ys))
        initial = {k: v.astype(low) for k, v in self.initial.items()}
        return self.module.loss_and_grads(cast, xs, ys, **initial, truncate=truncate, rng=rng)[1]


def check(module, steps=5, batch=3, seed=0, dtype="float64", sizes=None, truncate=None):
    """One Row per parameter and initial state: the analytic gradient (computed
    in dtype) against central differences of the float64 (truncated) loss;
    for randomized truncation, the mean of many estimates against full BPTT."""
    instance = problem(module, steps, batch, seed, sizes)
    if truncate is not None and truncate[0] == "random":
        return check_unbiased(instance, truncate, seed)
    grads = instance.grads(dtype, truncate)
    rng = np.random.default_rng(seed + 1)
    rows = []
    for name, array in {**instance.params, **instance.initial}.items():
        flat = list(np.ndindex(array.shape))
        entries = [flat[i] for i in sorted(rng.permutation(len(flat))[:MAX_ENTRIES])]
        numeric = numeric_gradient(lambda: instance.loss(truncate), array, entries)
        analytic = np.array([grads[name][index] for index in entries], dtype=np.float64)
        rows.append(Row(name, relative_error(analytic, numeric), TOLERANCE[dtype]))
    return rows


RANDOM_SAMPLES = 2000


def check_unbiased(instance, truncate, seed):
    """Rows of max |mean of estimates - full| / (5 standard errors): at most 1 if unbiased."""
    full = instance.grads()
    estimates = [instance.grads(truncate=truncate, rng=np.random.default_rng([seed, n])) for n in range(RANDOM_SAMPLES)]
    rows = []
    for name, exact in full.items():
        values = np.array([e[name] for e in estimates])
        stderr = values.std(axis=0, ddof=1) / np.sqrt(len(values))
        bound = 5 * stderr + 1e-12 * np.abs(exact).max()
        rows.append(Row(name, float((np.abs(values.mean(axis=0) - exact) / bound).max()), 1.0))
    return rows


def table(rows, measure="max rel. error"):
    lines = [f"{'parameter':<12}{measure:>16}  verdict"]
    for row in rows:
        lines.append(f"{row.name:<12}{row.error:>16.2e}  {'ok' if row.ok else 'FAIL'} (tolerance {row.tolerance:.0e})")
    return "\n".join(lines)
