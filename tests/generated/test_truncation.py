"""Truncated BPTT in the generated modules: window and chunk equal full BPTT
when k >= T, and agree with finite differences of the correspondingly
truncated loss; randomized truncation is unbiased, proved exactly by
enumerating every keep pattern with its probability."""

import itertools
import types

import numpy as np
import pytest

from bptt.app.verify.check import (
    RANDOM_STEPS,
    TOLERANCE,
    check_gradients,
    check_unbiased,
    compare,
    numeric_gradient,
    table,
)
from bptt.app.verify.patterns import GroupGenerators, PatternRng, group_count, one_forward_pass
from bptt.app.verify.problem import problem
from bptt.tests.support.modules import module_of
from bptt.tests.support.zoo import supporting

T, B = 5, 2
RECURRENT = [name for name in supporting("truncate") if name not in ("jordan",)]  # jordan has no recurrence to truncate
# a model with reverse-time states: its truncated loss truncates each group of steps in its own time
# (app/verify/reverse_loss.py), and each group draws its own keep pattern (2**(G*T) patterns in all)
CHECKED = RECURRENT


def enumerable(steps):
    """(name, steps) of each zoo model for each T whose keep patterns of every group are few enough to enumerate."""
    return [
        (name, t) for name in supporting("truncate") for t in steps if t * group_count(module_of(name)) <= RANDOM_STEPS
    ]


def all_kept(module, steps):
    """The rng of a keep pattern that keeps every link of every group of steps."""
    groups = group_count(module)
    return PatternRng([True] * steps) if groups == 1 else GroupGenerators([PatternRng([True] * steps)] * groups)


def setup(name, seed=0, steps=T):
    """A random instance of a zoo model's generated module (app/verify/problem.py)."""
    module = module_of(name)
    sizes = {size: 3 + i for i, size in enumerate(module.SIZES)}
    return problem(module, steps, B, seed, sizes)


@pytest.mark.parametrize("name", RECURRENT)
@pytest.mark.parametrize("mode", ["window", "chunk"])
def test_long_truncation_is_full_bptt(name, mode):
    instance = setup(name)
    full = instance.grads()
    for k in (T, T + 3):
        grads = instance.grads(truncate=(mode, k))
        for key in full:
            np.testing.assert_allclose(grads[key], full[key], rtol=1e-12, atol=1e-14, err_msg=f"{mode} k={k} {key}")


@pytest.mark.slow
@pytest.mark.parametrize("name", CHECKED)
@pytest.mark.parametrize("mode, k", [("window", 1), ("window", 2), ("chunk", 2), ("chunk", 3)])
def test_truncation_matches_finite_differences_of_truncated_loss(name, mode, k):
    """Every entry of every parameter and initial state, against the loss in
    which the detached states are constants (app/verify/problem.py, Problem.loss)."""
    instance = setup(name, seed=1)
    grads, full = instance.grads(truncate=(mode, k)), instance.grads()
    every = max(array.size for array in {**instance.params, **instance.initial}.values())
    rows = check_gradients(instance, "float64", (mode, k), np.random.default_rng(0), max_entries=every)
    assert all(row.ok for row in rows), f"{name} {mode} k={k}\n{table(rows)}"
    assert any(not np.allclose(grads[key], full[key]) for key in full), "the truncated gradient should differ here"


def test_truncated_loss_reference_differs_from_full_loss_gradient():
    """Control: the full backward pass does not fit the truncated loss, so the check above can fail."""
    instance = setup("elman", seed=1)
    full = instance.grads()
    array = instance.params["W"]
    entries = list(np.ndindex(array.shape))
    numeric, estimates = numeric_gradient(lambda: instance.loss(("window", 1)), array, entries)
    row = compare("W", np.array([full["W"][i] for i in entries]), numeric, estimates, TOLERANCE["float64"], 1.0)
    assert not row.ok and row.error > 1e-3, row


@pytest.mark.parametrize("pi", [0.1, 0.5])
@pytest.mark.parametrize("name, steps", enumerable([1, 5, 8]))
def test_randomized_truncation_is_unbiased_exactly(name, steps, pi):
    """The expectation over all 2**T keep patterns (2**(G*T): G groups of steps, each drawing its own), each
    gradient weighted by its probability pi**kept (1 - pi)**dropped, equals full BPTT to 1e-12 of each array's
    largest entry."""
    instance = setup(name, seed=2, steps=steps)
    rows = check_unbiased(instance, pi)
    assert all(row.ok and row.error <= 1e-12 for row in rows), rows
    if name in RECURRENT and steps > 1:  # the patterns differ, so the proof is not an identity
        one = instance.grads(truncate=("random", pi), rng=all_kept(instance.module, steps))
        assert any(not np.allclose(one[key], value) for key, value in instance.grads().items())


@pytest.mark.parametrize("name", ["lstm", "birnn"])
def test_one_forward_pass_gives_loss_and_grads_gradients_for_every_pattern(name):
    """check_unbiased's gradients of the keep patterns from one forward pass (a NumPy module's backward of its
    output_gradient; a module of groups of steps' loss_and_backward) are loss_and_grads' own, every array equal."""
    instance, truncate = setup(name, seed=2, steps=3), ("random", 0.5)
    groups = group_count(instance.module)

    def rng(kept):
        parts = [PatternRng(part) for part in np.split(np.asarray(kept), groups)]
        return parts[0] if groups == 1 else GroupGenerators(parts)

    patterns = list(itertools.product((True, False), repeat=3 * groups))
    grads_of = one_forward_pass(
        instance, "float64", (truncate, rng(patterns[0]), instance.grads(truncate=truncate, rng=rng(patterns[0])))
    )
    assert grads_of.__name__ != "plain", "loss_and_grads' own, one forward pass each"
    for kept in patterns:
        expected, got = instance.grads(truncate=truncate, rng=rng(kept)), grads_of(truncate, rng(kept))
        assert expected.keys() == got.keys() and all(np.array_equal(expected[k], got[k]) for k in expected), kept


def test_pattern_rng_gives_the_keep_weights_asked_for():
    """PatternRng feeds backward the pattern it holds: all kept with pi = 1 is full BPTT,
    and at pi = 0.5 the all-kept pattern doubles every flow through a step (so it differs)."""
    instance = setup("linear", seed=3)
    full = instance.grads()
    same = instance.grads(truncate=("random", 1.0), rng=PatternRng([True] * T))
    doubled = instance.grads(truncate=("random", 0.5), rng=PatternRng([True] * T))
    dropped = instance.grads(truncate=("random", 0.5), rng=PatternRng([False] * T))
    np.testing.assert_allclose(same["W_hh"], full["W_hh"], rtol=1e-14)
    assert not np.allclose(doubled["W_hh"], full["W_hh"])
    np.testing.assert_allclose(dropped["W_qh"], full["W_qh"], rtol=1e-14)  # the output layer has no flow in time
    assert np.all(dropped["h0"] == 0)  # no flow at all reaches h0


@pytest.mark.parametrize("name", CHECKED)
def test_enumeration_catches_a_biased_estimator(name):
    """Control: a module that weights kept steps by 1/(1.001 pi) instead of 1/pi fails the exact check."""
    module = module_of(name)
    biased = types.ModuleType(f"biased_{module.__name__}")
    biased.__dict__.update(module.__dict__)

    def loss_and_grads(*args, truncate=None, **kwargs):
        if truncate is not None and truncate[0] == "random":
            truncate = ("random", truncate[1] * 1.001)
        return module.loss_and_grads(*args, truncate=truncate, **kwargs)

    biased.loss_and_grads = loss_and_grads
    instance = problem(biased, T, B, 2, {size: 3 + i for i, size in enumerate(module.SIZES)})
    rows = check_unbiased(instance, 0.5)
    assert not all(row.ok for row in rows), rows
    assert max(row.error for row in rows) > 1e-5


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
    for name in supporting("truncate"):
        instance = setup(name)
        with pytest.raises(ValueError, match=message):
            instance.grads(truncate=truncate, rng=rng)
