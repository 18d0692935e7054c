"""Truncated BPTT in the generated modules: window and chunk equal full BPTT
when k >= T, and agree with finite differences of the correspondingly
truncated loss; randomized truncation is unbiased."""

import importlib

import numpy as np
import pytest

from codegen.check import numeric_gradient, relative_error
from derive.models import load, names
from derive.nodes import SoftmaxCrossEntropy, SquaredError

T, B = 5, 2
RECURRENT = [name for name in names() if name not in ("jordan",)]  # jordan has no recurrence to truncate


def setup(name, seed=0):
    module = importlib.import_module(f"generated.{name.replace('-', '_')}")
    rng = np.random.default_rng(seed)
    sizes = {size: 3 + i for i, size in enumerate(module.SIZES)}
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, T, B, **sizes)
    initial = {key: 0.5 * rng.standard_normal((B, sizes[size])) for key, size in module.STATES.items()}
    return module, load(name), params, xs, ys, initial


def step_losses(model, outputs, ys):
    """Per-step loss l_t (weighted 1/T for mean models), averaged over the batch: shape (steps,)."""
    loss = model.concrete_loss()
    if isinstance(loss, SquaredError):
        values = 0.5 * ((outputs - ys) ** 2).sum(axis=-1)
    elif isinstance(loss, SoftmaxCrossEntropy):
        top = outputs.max(axis=-1, keepdims=True)
        logsumexp = (top + np.log(np.exp(outputs - top).sum(axis=-1, keepdims=True)))[..., 0]
        values = logsumexp - np.take_along_axis(outputs, ys[..., None], axis=-1)[..., 0]
    else:
        raise AssertionError(f"no reference for {type(loss).__name__}")
    return values.mean(axis=1) / (T if model.mean else 1)


class TruncatedLoss:
    """The loss whose exact gradient a truncated backward pass computes, built
    from the generated forward pass run on segments of the sequence.

    A detached segment starts from the unperturbed full run's state at its
    start, held constant; an attached one (from time 0) from the given,
    perturbable initial state. Teacher-forced states are data, like inputs:
    the given initial one is never detached."""

    def __init__(self, module, model, params, xs, ys, initial):
        self.module, self.model, self.params, self.xs, self.ys, self.initial = module, model, params, xs, ys, initial
        frozen = {k: v.copy() for k, v in params.items()}
        self.states = self.forward(frozen, xs, ys, initial)[1]

    def forward(self, params, xs, ys, initial):
        args = (xs, ys) if self.model.teacher_forcing else (xs,)
        return self.module.forward(params, *args, **initial)

    def segment(self, start, stop, detached):
        """Per-step losses of steps start+1..stop."""
        forced = {f"{seq.name}0" for seq in self.model.forced}
        state = dict(self.initial)
        if detached:
            for key in self.module.STATES:
                if key not in forced or start > 0:
                    state[key] = self.states[key[:-1]][start]
        outputs, _ = self.forward(self.params, self.xs[start:stop], self.ys[start:stop], state)
        return step_losses(self.model, outputs, self.ys[start:stop])

    def __call__(self, mode, k):
        if mode == "chunk":  # the state entering each chunk is detached
            return sum(self.segment(a, min(a + k, T), a > 0).sum() for a in range(0, T, k))
        # window: output j's loss sees the state at j-k-1 (if any) as a constant
        return sum(self.segment(max(0, j - k - 1), j, j - k - 1 >= 0)[-1] for j in range(1, T + 1))


@pytest.mark.parametrize("name", RECURRENT)
@pytest.mark.parametrize("mode", ["window", "chunk"])
def test_long_truncation_is_full_bptt(name, mode):
    module, _, params, xs, ys, initial = setup(name)
    _, full = module.loss_and_grads(params, xs, ys, **initial)
    for k in (T, T + 3):
        _, grads = module.loss_and_grads(params, xs, ys, **initial, truncate=(mode, k))
        for key in full:
            np.testing.assert_allclose(grads[key], full[key], rtol=1e-12, atol=1e-14, err_msg=f"{mode} k={k} {key}")


@pytest.mark.parametrize("name", RECURRENT)
@pytest.mark.parametrize("mode, k", [("window", 1), ("window", 2), ("chunk", 2), ("chunk", 3)])
def test_truncation_matches_finite_differences_of_truncated_loss(name, mode, k):
    module, model, params, xs, ys, initial = setup(name, seed=1)
    truncated = TruncatedLoss(module, model, params, xs, ys, initial)
    _, grads = module.loss_and_grads(params, xs, ys, **initial, truncate=(mode, k))
    _, full = module.loss_and_grads(params, xs, ys, **initial)
    arrays = {**params, **initial}

    def loss():
        return truncated(mode, k)

    differs = False
    for key, array in arrays.items():
        entries = list(np.ndindex(array.shape))
        numeric = numeric_gradient(loss, array, entries)
        analytic = np.array([grads[key][i] for i in entries])
        error = relative_error(analytic, numeric)
        assert error <= 1e-7, f"{name} {mode} k={k} {key}: error {error:.1e}\nanalytic {analytic}\nnumeric {numeric}"
        differs = differs or not np.allclose(grads[key], full[key])
    assert differs, "the truncated gradient should differ from full BPTT here"


@pytest.mark.parametrize("name", RECURRENT)
def test_randomized_truncation_is_unbiased(name):
    module, _, params, xs, ys, initial = setup(name, seed=2)
    _, full = module.loss_and_grads(params, xs, ys, **initial)
    samples = 3000
    estimates = [
        module.loss_and_grads(params, xs, ys, **initial, truncate=("random", 0.5), rng=np.random.default_rng(s))[1]
        for s in range(samples)
    ]
    spread = False
    for key in full:
        values = np.array([e[key] for e in estimates])
        mean, stderr = values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(samples)
        bound = 5 * stderr + 1e-12 * np.abs(full[key]).max()
        assert np.all(np.abs(mean - full[key]) <= bound), f"{key}: mean {mean} vs full {full[key]} (bound {bound})"
        spread = spread or stderr.max() > 0
    assert spread, "randomized estimates should vary from seed to seed"


@pytest.mark.parametrize("name", RECURRENT)
def test_randomized_with_pi_one_is_full(name):
    module, _, params, xs, ys, initial = setup(name)
    _, full = module.loss_and_grads(params, xs, ys, **initial)
    _, grads = module.loss_and_grads(params, xs, ys, **initial, truncate=("random", 1.0), rng=np.random.default_rng(0))
    for key in full:
        np.testing.assert_allclose(grads[key], full[key], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "truncate, rng, message",
    [
        (("window", 0), None, r"truncate=\('window', k\): k must be an integer >= 1, got 0"),
        (("chunk", -2), None, r"truncate=\('chunk', k\): k must be an integer >= 1, got -2"),
        (("chunk", 1.5), None, r"k must be an integer >= 1, got 1.5"),
        (("random", 0.0), np.random.default_rng(0), r"pi must be in \(0, 1\], got 0.0"),
        (("random", 1.5), np.random.default_rng(0), r"pi must be in \(0, 1\], got 1.5"),
        (("random", 0.5), None, r"needs rng=np.random.default_rng\(seed\)"),
        (("bogus", 3), None, r"truncate must be None, \('window', k\), \('chunk', k\) or \('random', pi\)"),
        ("window", None, r"truncate must be None"),
    ],
)
def test_bad_truncation_is_a_clear_error(truncate, rng, message):
    for name in names():
        module, _, params, xs, ys, _ = setup(name)
        with pytest.raises(ValueError, match=message):
            module.loss_and_grads(params, xs, ys, truncate=truncate, rng=rng)
