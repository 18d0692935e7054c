"""Properties of every zoo module over random sizes (1..7), T (1..12), B (1..5), dtypes and
truncations, drawn by Hypothesis (deterministically: derandomized, no example database):
backward agrees with finite differences of the loss it differentiates, and float32 agrees
with float64 to float32 precision."""

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_generated import problem as drawn

from bptt.app.verify import trusted
from bptt.app.verify.check import check, check_gradients, table
from bptt.app.verify.patterns import PatternRng
from bptt.app.verify.problem import Problem, problem
from bptt.tests.support.modules import module_of
from bptt.tests.support.zoo import REDUCING, WITH_REVERSE_STATES, supporting

pytestmark = pytest.mark.slow  # each runs in a worker process while the suite runs
NAMES = supporting("truncate")
CHECKED = NAMES  # a model with reverse-time states: each group truncated in its own time (app/verify/reverse_loss.py)
# KeptPattern's link-scaled loss runs the whole model step by step, forward: a forward-only model's
KEPT = [name for name in NAMES if name not in WITH_REVERSE_STATES]
ENTRIES = 3  # finite differences on this many entries of each array per example
DETERMINISTIC = {
    "deadline": None,
    "database": None,
    "derandomize": True,
    "suppress_health_check": [HealthCheck.too_slow],
}
FINITE_DIFFERENCES = settings(max_examples=20, **DETERMINISTIC)  # each example runs Ridders on ~20 entries
# A norm's adjoint divides by sigma (down to ~0.02 in these draws) and cancels: g - mean(g) - x_hat mean(x_hat g).
# At h = 1 more so: W_h h_{t-1} is a fixed vector times a scalar, whose norm ignores the scalar but for eps, so
# dL/dh0 is a residue ~eps/sigma^2 of the adjoint's terms (and c_t's norm over one unit outputs its bias). float32
# arithmetic on float32 inputs, against float64 arithmetic on the same inputs, errs by 2e-5 of W_h's largest
# gradient at h = 2 and 2e-3 of dL/dh0's at h = 1 (rounding the inputs alone: 2e-7 and 3e-8): the float32 module is
# not wrong; its formulas' rounding is amplified. check's float32 verdict (1e-3 of each entry, down to 1e-3 of its
# array's largest) needs 1e-6, so these models' finite differences run in float64 only; their float32 accuracy is
# test_float32_agrees_with_float64's, drawn at h >= 2: at h = 1 the norms ignore their inputs (but for eps), a
# model no user trains, whose residues its bound does not count (1.02 of it in 3000 random draws).
DTYPES = {name: ["float64"] if name in REDUCING else ["float64", "float32"] for name in CHECKED}
SMALLEST = {name: {"h": 2} for name in REDUCING}  # test_float32_agrees_with_float64's smallest sizes


@st.composite
def instances(draw, module, smallest=None):
    """(sizes, T, B, seed): every size 1..7 (or from smallest's for the sizes it names), T 1..12, B 1..5."""
    least = smallest or {}
    sizes = {size: draw(st.integers(least.get(size, 1), 7), label=size) for size in module.SIZES}
    return sizes, draw(st.integers(1, 12), label="T"), draw(st.integers(1, 5), label="B"), draw(st.integers(0, 2**16))


def unfrozen(module, steps, batch, seed, sizes):
    """problem(module, steps, batch, seed, sizes)'s arrays (test_generated.py's problem draws them alike), without its
    frozen run (Problem.freeze's forward pass, which only truncated losses read)."""
    return Problem(module, *drawn(module, steps, batch, sizes, seed))


def truncations(steps):
    """None, ("window", k) or ("chunk", k) with k = 1..T+1 (k >= T is full BPTT)."""
    k = st.integers(1, steps + 1)
    return st.none() | st.tuples(st.just("window"), k) | st.tuples(st.just("chunk"), k)


@pytest.mark.parametrize("name", CHECKED)
@FINITE_DIFFERENCES
@given(data=st.data())
def test_backward_agrees_with_finite_differences(name, data):
    """app.verify.check's verdict on sampled entries of every gradient, computed in float64 or float32,
    against Ridders' differences of the float64 loss that the truncation differentiates."""
    module = module_of(name)
    sizes, steps, batch, seed = data.draw(instances(module))
    truncate = data.draw(truncations(steps), label="truncate")
    dtype = data.draw(st.sampled_from(DTYPES[name]), label="dtype")
    rows = check(module, steps, batch, seed, dtype, sizes, truncate, max_entries=ENTRIES)
    assert all(row.ok for row in rows), f"{name} {dtype} truncate={truncate}\n{table(rows)}"


@dataclass
class KeptPattern(Problem):
    """A problem whose randomized truncation keeps one pattern of links (xi_t = 1/pi where kept,
    0 elsewhere), with the loss whose exact gradient that estimate is."""

    kept: tuple = ()

    def grads(self, dtype="float64", truncate=None, rng=None):
        return super().grads(dtype, truncate, PatternRng(self.kept))

    def loss(self, truncate=None):
        """The flow from step t+1 back into step t is weighted by keep[t]: step t+1 starts from
        keep[t] h_t + (1 - keep[t]) h_t', h_t' the state of the unperturbed run held constant
        (the same value, with its derivative scaled by keep[t]). Teacher-forced states are data
        and are not scaled, as in backward. The steps run one forward pass each (app/verify/trusted.py's, as the
        check's); the losses of all their outputs are taken at once (one per set of a wide instance,
        app/verify/sets.py).

        A dropped link (keep[t] = 0) starts step t+1 from h_t' alone, whatever came before: the runs of steps
        from one dropped link to the next are apart, and run side by side in the batch, their j-th steps in one
        forward pass (a run that has ended repeats its last step from its held state, its outputs unread)."""
        keep = np.where(self.kept, 1 / truncate[1], 0.0)
        module, steps, batch = self.module, self.steps(), len(self.xs[0])
        firsts = [0, *[t for t in range(1, len(steps)) if keep[t] == 0]]
        runs = [range(a, b) for a, b in zip(firsts, [*firsts[1:], len(steps)], strict=True)]
        state, outputs = dict(self.initial), [None] * len(steps)
        params = trusted.tiled(module, self.params, len(runs))  # a row per sample (Batched's vectors): per run
        for j in range(max(map(len, runs))):
            at = [run[min(j, len(run) - 1)] for run in runs]
            scale = np.repeat([keep[t] if j < len(run) else 0.0 for t, run in zip(at, runs, strict=True)], batch)
            held = {key: np.concatenate([steps[t][1][key] for t in at]) for key in state}
            start = {
                key: value
                if key[:-1] in module.TEACHER_FORCED
                else scale[:, None] * value + (1 - scale[:, None]) * held[key]
                for key, value in (state if j > 0 else self._first(runs, held)).items()
            }
            data = [np.concatenate([steps[t][0][i] for t in at], axis=1) for i in range(len(steps[0][0]))]
            output, cache = trusted.forward(module, params, data, start)  # its arrays reused by the next step
            for r, (t, run) in enumerate(zip(at, runs, strict=True)):
                if j < len(run):
                    outputs[t] = output[:, r * batch : (r + 1) * batch].copy()
            state = {key: cache[key[:-1]][1] for key in state}
        losses = self.scores(np.concatenate(outputs), self.ys)  # of each step, sample and set
        total = (np.add.reduce(losses, 1) / losses.shape[1]).sum(0) / (len(self.xs) if module.MEAN else 1)
        return total if self.sets > 1 else total[0]

    def _first(self, runs, held):
        """The states the runs' first steps start from, before keep: the initial states for the run from step 0,
        held ones for the others (a teacher-forced state's held value is the data it took)."""
        rows = len(self.xs[0])
        return {key: np.concatenate([value, held[key][rows:]]) for key, value in self.initial.items()}

    def steps(self):
        """Per step t: the forward pass's data arguments and the unperturbed run's states at t (the same
        for every evaluation of the loss, so kept)."""
        if not hasattr(self, "_steps"):
            data = [
                (self.xs[t : t + 1], self.ys[t : t + 1]) if self.module.TEACHER_FORCED else (self.xs[t : t + 1],)
                for t in range(len(self.xs))
            ]
            held = [{key: self.frozen[key[:-1]][t] for key in self.initial} for t in range(len(self.xs))]
            self._steps = list(zip(data, held, strict=True))
        return self._steps


@pytest.mark.parametrize("name", KEPT)
@FINITE_DIFFERENCES
@given(data=st.data())
def test_randomized_estimate_is_the_gradient_of_its_link_scaled_loss(name, data):
    """One randomized-truncation estimate (a drawn keep pattern, weights 1/pi or 0) is the exact
    gradient of KeptPattern.loss: app.verify.check's verdict against Ridders' differences of it.
    (Its expectation over patterns is full BPTT: app.verify.check proves that by enumeration.)"""
    module = module_of(name)
    sizes, steps, batch, seed = data.draw(instances(module))
    pi = data.draw(st.floats(0.2, 1.0), label="pi")
    kept = tuple(data.draw(st.lists(st.booleans(), min_size=steps, max_size=steps), label="kept"))
    instance = KeptPattern(**vars(problem(module, steps, batch, seed, sizes)), kept=kept)
    rows = check_gradients(instance, "float64", ("random", pi), np.random.default_rng(seed), ENTRIES)
    assert all(row.ok for row in rows), f"{name} pi={pi} kept={kept}\n{table(rows)}"


UNIT = np.finfo(np.float32).eps / 2  # unit roundoff u = 2**-24


def float32_tolerance(steps, batch, sizes):
    """A bound on |float32 - float64| relative to the magnitude of what is computed.

    Every dot product over n <= max(sizes) terms errs by at most n u of its terms' magnitude;
    the forward recursion carries such errors through T steps and backward through T more;
    a parameter gradient then sums T B products. Hence u (2 T n + T B), times 10 for the
    elementwise functions and the softmax on the way: over 12 500 draws of these strategies
    the largest error seen was 3 u (2 T n + T B)."""
    return 10 * UNIT * (2 * steps * max(sizes.values()) + steps * batch)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, **DETERMINISTIC)
@given(data=st.data())
def test_float32_agrees_with_float64(name, data):
    """float32 arithmetic on float32 numbers stays float32 and agrees with float64 arithmetic on the
    same numbers (the float32 arrays widened, so only the arithmetic differs) within float32_tolerance
    of the magnitude: for outputs and the loss their own largest entry; for gradients the largest
    entry of any gradient, as all are sums of the same adjoints times states and inputs (one array's
    own largest entry may be the residue of cancellation: a 1 x 1 W when h = 1)."""
    module = module_of(name)
    sizes, steps, batch, seed = data.draw(instances(module, SMALLEST.get(name)))
    truncate = data.draw(truncations(steps), label="truncate")
    low = unfrozen(module, steps, batch, seed, sizes).cast("float32")
    wide = [{k: widen(v) for k, v in a.items()} if isinstance(a, dict) else widen(a) for a in low]
    (narrow, _), (exact, cache) = (run(module, *arrays, truncate) for arrays in (low, wide))
    largest = {key: float(np.abs(value).max()) for key, value in exact.items()}
    gradients = max(largest[key] for key in [*module.PARAMS, *module.STATES])
    tolerance = float32_tolerance(steps, batch, sizes) * norms_conditioning(cache)
    for key, value in exact.items():
        assert narrow[key].dtype == np.float32, f"{name} {key} has dtype {narrow[key].dtype}; expected float32"
        allowed = tolerance * (largest[key] if key in ("outputs", "loss") else gradients)
        error = float(np.abs(narrow[key] - value).max())
        assert error <= allowed, f"{name} {key}: float32 off by {error:.2e} > {allowed:.2e} (sizes {sizes})"


def norms_conditioning(cache):
    """How much a norm's centring v - mean(v) amplifies float32's rounding: it errs by u |v|, then is divided by
    sigma, so for inputs of order one by 1/sigma at the smallest sigma of any norm (derive/norms.py names it
    sigma_<v>) at any step; 1 without norms. (The bound above held without it for h >= 2 in 800 random draws
    of lstm-layernorm, at most 0.42 of it, but not where a norm's inputs nearly coincide: sigma 0.004 at h = 2.)"""
    sigmas = [float(value[1:].min()) for key, value in cache.items() if key.startswith("sigma_")]
    return max([1.0, *(1 / sigma for sigma in sigmas)])


def widen(array):
    return array.astype(np.float64) if array.dtype == np.float32 else array


def run(module, params, xs, ys, initial, truncate):
    """The outputs, the loss and every gradient of one call, by name; and the forward pass's cache."""
    data = (xs, ys) if module.TEACHER_FORCED else (xs,)
    outputs, cache = module.forward(params, *data, **initial)
    loss, grads = module.loss_and_grads(params, xs, ys, **initial, truncate=truncate)
    return {"outputs": outputs, "loss": np.asarray(loss), **grads}, cache
