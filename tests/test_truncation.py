"""Truncated BPTT in the generated modules: window and chunk equal full BPTT
when k >= T, and agree with finite differences of the correspondingly
truncated loss; randomized truncation is unbiased."""

import numpy as np
import pytest
from bptt.codegen.check import numeric_gradient, problem, relative_error
from bptt.derive.models import names
from support import module_of

T, B = 5, 2
RECURRENT = [name for name in names() if name not in ("jordan",)]  # jordan has no recurrence to truncate


def setup(name, seed=0):
    """A random instance of a zoo model's generated module (codegen.check.Problem)."""
    module = module_of(name)
    sizes = {size: 3 + i for i, size in enumerate(module.SIZES)}
    return problem(module, T, B, seed, sizes)


@pytest.mark.parametrize("name", RECURRENT)
@pytest.mark.parametrize("mode", ["window", "chunk"])
def test_long_truncation_is_full_bptt(name, mode):
    instance = setup(name)
    full = instance.grads()
    for k in (T, T + 3):
        grads = instance.grads(truncate=(mode, k))
        for key in full:
            np.testing.assert_allclose(grads[key], full[key], rtol=1e-12, atol=1e-14, err_msg=f"{mode} k={k} {key}")


@pytest.mark.parametrize("name", RECURRENT)
@pytest.mark.parametrize("mode, k", [("window", 1), ("window", 2), ("chunk", 2), ("chunk", 3)])
def test_truncation_matches_finite_differences_of_truncated_loss(name, mode, k):
    """Every entry of every parameter and initial state, against the loss in
    which the detached states are constants (codegen.check.Problem.loss)."""
    instance = setup(name, seed=1)
    grads, full = instance.grads(truncate=(mode, k)), instance.grads()
    differs = False
    for key, array in {**instance.params, **instance.initial}.items():
        entries = list(np.ndindex(array.shape))
        numeric = numeric_gradient(lambda: instance.loss((mode, k)), array, entries)
        analytic = np.array([grads[key][i] for i in entries])
        error = relative_error(analytic, numeric)
        assert error <= 1e-7, f"{name} {mode} k={k} {key}: error {error:.1e}\nanalytic {analytic}\nnumeric {numeric}"
        differs = differs or not np.allclose(grads[key], full[key])
    assert differs, "the truncated gradient should differ from full BPTT here"


def test_truncated_loss_reference_differs_from_full_loss_gradient():
    """Control: the full backward pass does not fit the truncated loss, so the check above can fail."""
    instance = setup("elman", seed=1)
    full = instance.grads()
    array = instance.params["W"]
    entries = list(np.ndindex(array.shape))
    numeric = numeric_gradient(lambda: instance.loss(("window", 1)), array, entries)
    assert relative_error(np.array([full["W"][i] for i in entries]), numeric) > 1e-3


@pytest.mark.parametrize("name", RECURRENT)
def test_randomized_truncation_is_unbiased(name):
    """The mean of many estimates is within 5 standard errors (from the samples' spread) of full BPTT."""
    instance = setup(name, seed=2)
    full = instance.grads()
    samples = 3000
    estimates = [instance.grads(truncate=("random", 0.5), rng=np.random.default_rng(s)) for s in range(samples)]
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
    instance = setup(name)
    full, grads = instance.grads(), instance.grads(truncate=("random", 1.0), rng=np.random.default_rng(0))
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
        instance = setup(name)
        with pytest.raises(ValueError, match=message):
            instance.grads(truncate=truncate, rng=rng)
