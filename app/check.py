"""Check a generated module's gradients against finite differences of its own loss.

Each checked entry's derivative comes from Ridders' method (codegen.ridders): central
differences at steps shrinking from one scaled to the entry, extrapolated to a zero step,
with an estimate of their own error. Entry a (analytic, in the checked dtype) passes against
n (numeric, float64) when |a - n| <= tolerance * max(|a|, |n|, FLOOR * largest) + MARGIN *
estimate, largest being the array's largest |gradient|.

What it resolves: a relative error of the tolerance (1e-7 in float64, 1e-3 in float32) in
every checked entry down to FLOOR of its array's largest; smaller entries only to that
absolute level. What it cannot: a derivative below the loss's rounding noise (about
eps |loss| / step; the estimate then says so and the entry is only bounded), a loss that is
not smooth at the point (the differences never converge; their spread becomes the estimate),
and entries it does not sample (at most max_entries per array). A forward pass that overflows
is refused (NonFiniteForward) rather than differenced.

Randomized truncation is checked exactly: the expectation over every keep pattern, each
weighted by its probability, against full BPTT, for T up to 12 (TooManyPatterns beyond)."""

import importlib
import itertools
import types
from dataclasses import dataclass

import numpy as np

from bptt.app.ridders import ridders
from bptt.codegen.backends import BACKENDS, module_filename

TOLERANCE = {"float64": 1e-7, "float32": 1e-3}
FLOOR = 1e-3  # entries below this fraction of their array's largest are measured against it
MARGIN = 10  # times the finite differences' error estimate, a heuristic (seen up to 5 times optimistic)
MAX_ENTRIES = 40  # finite differences on at most this many entries per array
EXACT = {"float64": 1e-12, "float32": 1e-5}  # the expectation over keep patterns against full BPTT
PATTERNS = 4096  # at most this many keep patterns (2**T) are enumerated


class NonFiniteForward(Exception):
    """The forward pass overflowed: finite differences of it would be meaningless."""


class TooManyPatterns(ValueError):
    """Randomized truncation at a T whose 2**T keep patterns are too many to enumerate."""


@dataclass(frozen=True)
class Row:
    """One array's verdict: the largest relative difference, the finite differences'
    largest relative error estimate, and the worst entry's difference / allowance."""

    name: str
    error: float
    estimate: float
    tolerance: float
    ratio: float

    @property
    def ok(self):
        return self.ratio <= 1


def load_module(model, from_zoo, backend="numpy"):
    """generated/<model>.py (or <model>_<backend>.py) for a zoo model, or the module rendered in memory for a
    user's model."""
    name = module_filename(model, backend)[:-3]
    if from_zoo:
        try:
            return importlib.import_module(f"bptt.generated.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"bptt.generated.{name}":
                raise  # the module is there, its framework is not
            flag = "" if backend == "numpy" else f" --backend {backend}"
            raise FileNotFoundError(f"generated/{name}.py does not exist; run `bptt codegen {model.name}{flag}`") from None
    module = types.ModuleType(name)
    source = BACKENDS[backend].module_source(model)
    exec(compile(source, f"<bptt {model.name} {backend}>", "exec"), module.__dict__)
    return module


def default_sizes(module):
    """Distinct small sizes (3, 4, 5, ...) so that a transposed shape cannot pass."""
    return {name: 3 + i for i, name in enumerate(module.SIZES)}


# Fourth-order central differences (the adjoint tests' Jacobian-vector products):
# f'(x) = sum of weight * f(x + step e), over 12 e, + O(e^4).
STENCIL = ((2, -1), (1, 8), (-1, -8), (-2, 1))


def numeric_gradient(loss, array, entries, enough=None):
    """Ridders' derivatives of loss() along the given entries of array, and their error
    estimates (two arrays); enough[n] (default 0) ends the ladder of entry n early."""
    enough = np.zeros(len(entries)) if enough is None else enough
    pairs = [ridders(loss, array, index, limit) for index, limit in zip(entries, enough, strict=True)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def compare(name, analytic, numeric, estimates, tolerance, largest):
    """Row of an array: entry n passes if |a - n| <= tolerance * scale + MARGIN * estimate, where
    scale = max(|a|, |n|, FLOOR * largest) and largest is the array's largest |gradient|."""
    scale = np.maximum(np.maximum(np.abs(analytic), np.abs(numeric)), FLOOR * max(largest, np.abs(numeric).max()))
    scale = np.where(scale > 0, scale, np.finfo(float).tiny)
    error, estimate = np.abs(analytic - numeric) / scale, estimates / scale
    ratio = error / (tolerance + MARGIN * estimate)
    return Row(name, float(error.max()), float(estimate.max()), tolerance, float(ratio.max()))


def negligible(analytic, largest, tolerance):
    """Per entry, an error estimate negligible in compare's allowance: Ridders' ladder may stop there."""
    return 0.01 * tolerance * np.maximum(np.abs(analytic), FLOOR * largest)


def sample_entries(shape, count, rng):
    """At most count indices of an array of this shape, in order, drawn by rng."""
    flat = list(np.ndindex(shape))
    return [flat[i] for i in sorted(rng.permutation(len(flat))[:count])]


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
        return self.run(params, start, stop, initial)[1 if cache else 0]

    def run(self, params, start, stop, initial):
        """The generated forward pass over steps start+1..stop: (outputs, cache)."""
        args = (self.xs[start:stop], self.ys[start:stop]) if self.module.TEACHER_FORCED else (self.xs[start:stop],)
        return self.module.forward(params, *args, **initial)

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
            return self.segment(0, min(k, steps), False).sum() + self.windows(k)
        raise ValueError(f"no deterministic loss for truncate={truncate!r}")

    def windows(self, k):
        """The losses of outputs j > k (as segment(j-k-1, j, True)[-1] each): every window of steps j-k..j,
        entered from the frozen states at j-k-1, side by side along the batch in one forward pass."""
        starts = range(len(self.xs) - k)
        if not starts:
            return 0.0

        def entering(key, s):  # a teacher-forced o_0 is data, like an input: perturbable, never frozen
            return self.initial[key] if key[:-1] in self.module.TEACHER_FORCED and s == 0 else self.frozen[key[:-1]][s]

        xs, ys = (np.concatenate([a[s : s + k + 1] for s in starts], axis=1) for a in (self.xs, self.ys))
        state = {key: np.concatenate([entering(key, s) for s in starts]) for key in self.module.STATES}
        outputs, _ = self.module.forward(self.params, *((xs, ys) if self.module.TEACHER_FORCED else (xs,)), **state)
        last = self.module.losses(outputs, ys)[-1].reshape(len(starts), -1)  # window by window, B samples each
        return (last.mean(axis=1) / (len(self.xs) if self.module.MEAN else 1)).sum()

    def cast(self, dtype):
        """params, xs, ys and initial states in dtype (integer labels stay integers)."""
        low = np.dtype(dtype)
        params = {k: v.astype(low) for k, v in self.params.items()}
        xs, ys = (a.astype(low) if np.issubdtype(a.dtype, np.floating) else a for a in (self.xs, self.ys))
        return params, xs, ys, {k: v.astype(low) for k, v in self.initial.items()}

    def grads(self, dtype="float64", truncate=None, rng=None):
        params, xs, ys, initial = self.cast(dtype)
        return self.module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng)[1]

    def require_finite(self, dtype):
        """Raise NonFiniteForward naming the first array and step at which the forward pass in dtype overflows."""
        low = Problem(self.module, *self.cast(dtype))
        outputs, cache = low.run(low.params, 0, len(low.xs), low.initial)
        first = _first_nonfinite({**cache, "outputs": outputs}, len(low.xs))
        if first is None:
            first = _first_nonfinite({"the loss": self.module.losses(outputs, low.ys)}, len(low.xs))
        if first is not None:
            remedy = "fewer steps" + (" or float64" if np.dtype(dtype) != np.float64 else "")
            raise NonFiniteForward(
                f"the forward pass in {dtype} overflows: {first[0]} is not finite from step t={first[1]} of "
                f"T={len(low.xs)} (nothing to differentiate; {remedy} may stay finite)"
            )


def _first_nonfinite(arrays, steps):
    """(name, t) of the earliest step t at which one of the named time-major arrays holds a
    nan or inf, or None; an array of steps + 1 rows starts at step 0, of steps rows at step 1."""
    first = None
    for name, values in arrays.items():
        if values.dtype.kind != "f":
            continue
        bad = ~np.isfinite(values.reshape(len(values), -1)).all(axis=1)
        step = int(np.argmax(bad)) + steps + 1 - len(values)
        if bad.any() and (first is None or step < first[1]):
            first = (name, step)
    return first


def check(module, steps=5, batch=3, seed=0, dtype="float64", sizes=None, truncate=None, max_entries=MAX_ENTRIES):
    """One Row per parameter and initial state: the analytic gradient (computed in dtype)
    against Ridders' derivatives of the float64 (truncated) loss on at most max_entries
    entries of each array; for randomized truncation, the exact expectation against full BPTT.
    Raises NonFiniteForward if the forward pass overflows, TooManyPatterns if 2**steps is too many."""
    randomized = truncate is not None and truncate[0] == "random"
    if randomized and 2**steps > PATTERNS:
        raise TooManyPatterns(
            f"randomized truncation is checked exactly, over all 2**T keep patterns: T={steps} has {2**steps}, "
            f"more than {PATTERNS} (use T <= {PATTERNS.bit_length() - 1}; a sampled mean has no honest bound "
            "when a weight can reach 1/pi**T)"
        )
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported, not warned about
        instance = problem(module, steps, batch, seed, sizes)
        for kind in dict.fromkeys((dtype, "float64")):
            instance.require_finite(kind)
        if randomized:
            return check_unbiased(instance, truncate[1], dtype)
        return check_gradients(instance, dtype, truncate, np.random.default_rng(seed + 1), max_entries)


def check_gradients(instance, dtype, truncate, chooser, max_entries):
    """Rows of the analytic gradient against Ridders' derivatives on entries drawn by chooser."""
    grads, tolerance = instance.grads(dtype, truncate), TOLERANCE[dtype]
    rows = []
    for name, array in {**instance.params, **instance.initial}.items():
        entries = sample_entries(array.shape, max_entries, chooser)
        analytic = np.array([grads[name][index] for index in entries], dtype=np.float64)
        largest = float(np.abs(grads[name]).max())
        enough = negligible(analytic, largest, tolerance)
        numeric, estimates = numeric_gradient(lambda: instance.loss(truncate), array, entries, enough)
        rows.append(compare(name, analytic, numeric, estimates, tolerance, largest))
    return rows


class PatternRng(np.random.Generator):
    """A Generator whose random(T) gives one keep pattern: 0.0 where kept (below any pi), 1.0 where dropped."""

    def __init__(self, kept):
        super().__init__(np.random.PCG64(0))
        self.kept = np.asarray(kept, dtype=bool)

    def random(self, size=None, dtype=np.float64, out=None):
        return np.where(self.kept, 0.0, 1.0)


def expected_gradient(instance, pi, dtype="float64"):
    """The exact expectation of the randomized-truncation gradient: the sum over all 2**T keep
    patterns (xi = 1/pi kept, with probability pi; 0 dropped) of its gradient times its probability."""
    steps, total = len(instance.xs), {}
    for kept in itertools.product((True, False), repeat=steps):
        probability = pi ** sum(kept) * (1 - pi) ** (steps - sum(kept))
        if probability > 0:
            for name, grad in instance.grads(dtype, ("random", pi), PatternRng(kept)).items():
                total[name] = total.get(name, 0.0) + probability * grad.astype(np.float64)
    return total


def check_unbiased(instance, pi, dtype="float64"):
    """Rows of max |expectation - full BPTT| / max |full BPTT|, at most EXACT[dtype]."""
    expected, tolerance = expected_gradient(instance, pi, dtype), EXACT[dtype]
    rows = []
    for name, full in instance.grads(dtype).items():
        error = float(np.abs(expected[name] - full).max() / max(np.abs(full).max(), np.finfo(float).tiny))
        rows.append(Row(name, error, 0.0, tolerance, error / tolerance))
    return rows


def table(rows, measure="max rel. error", estimate="FD error est.", label="parameter"):
    """The rows as text; estimate=None leaves the error-estimate column out."""
    lines = [f"{label:<12}{measure:>16}{estimate or '':>16}  verdict"]
    for row in rows:
        shown = f"{row.estimate:>16.2e}" if estimate else f"{'':>16}"
        verdict = "ok" if row.ok else "FAIL"
        lines.append(f"{row.name:<12}{row.error:>16.2e}{shown}  {verdict} (tolerance {row.tolerance:.0e})")
    return "\n".join(lines)
