"""The gradient check itself (app.verify.check, app.verify.ridders): Ridders' derivatives are
right and know their error, cases that the old fixed-step differences failed pass, an
overflowing forward pass is reported as such, and randomized truncation at a T too long
to enumerate is refused."""

import numpy as np
import pytest

from bptt.app.verify.check import FLOOR, MARGIN, MAX_ENTRIES, TooManyPatterns, check, compare_arrays, table
from bptt.app.verify.problem import NonFiniteForward, problem
from bptt.app.verify.ridders import ridders
from bptt.tests.support.cli import assert_error, bptt, table_rows
from bptt.tests.support.modules import module_of

POINT = np.array([0.3, -1.2, 0.05, 2.0, 0.7])


def wavy(a):
    """A smooth function of a[:-1] (a[-1] is not read) and its exact gradient."""
    x = a[:-1]
    value = np.sum(np.exp(np.sin(3 * x)) * x**2)
    grad = np.exp(np.sin(3 * x)) * (3 * np.cos(3 * x) * x**2 + 2 * x)
    return value, np.append(grad, 0.0)


@pytest.mark.parametrize("function", ["wavy", "steep", "quadratic"])
def test_ridders_is_within_its_own_error_estimate(function):
    """On functions with known derivatives, each entry's error is within the MARGIN times the
    estimate that the verdict allows, and the estimate below 1e-9 relative: a smooth function,
    one that needs far smaller steps than the first (exp(400 a)), and a quadratic (differences
    exact up to rounding)."""
    losses = {
        "wavy": lambda a: wavy(a)[0],
        "steep": lambda a: np.sum(np.exp(400 * a[:-1] - 400)),
        "quadratic": lambda a: np.sum((a[:-1] - 0.5) ** 2 * 3.7),
    }
    exact = {
        "wavy": lambda a: wavy(a)[1],
        "steep": lambda a: np.append(400 * np.exp(400 * a[:-1] - 400), 0.0),
        "quadratic": lambda a: np.append(7.4 * (a[:-1] - 0.5), 0.0),
    }
    array = POINT.copy()
    truth = exact[function](array)
    for index in range(len(array)):
        value, estimate = ridders(lambda: losses[function](array), array, (index,))
        assert np.array_equal(array, POINT), "the entry is restored"
        error = abs(value - truth[index])
        assert error <= MARGIN * estimate, f"{index}: {value!r} vs {truth[index]!r} (estimate {estimate})"
        assert estimate <= 1e-9 * max(abs(truth).max(), 1e-300), f"{index}: estimate {estimate} for {truth[index]}"
    assert ridders(lambda: losses[function](array), array, (len(array) - 1,))[0] == 0.0, "an unread entry gets 0"


def test_ridders_stops_early_when_enough():
    """With `enough` set, the ladder stops as soon as the estimate is below it: fewer loss
    evaluations than without, and an estimate still below `enough`."""
    array, calls = POINT.copy(), []

    def loss():
        calls.append(1)
        return wavy(array)[0]

    ridders(loss, array, (1,))
    full = len(calls)
    calls.clear()
    value, estimate = ridders(loss, array, (1,), enough=1e-7)
    assert estimate <= 1e-7 and len(calls) < full, (estimate, len(calls), full)
    assert abs(value - wavy(array)[1][1]) <= MARGIN * estimate


def near_singular(x):
    """A smooth loss along x with a faint feature 0.011 away, 0.0015 wide (as a norm's 1/sigma where the deviation
    nears sqrt(eps)): Ridders' first steps (0.055 down) straddle it; and the exact derivative at 0."""
    value = -0.005 * x - 0.07 * x**3 / 3 + 1e-11 / np.sqrt((x - 0.011) ** 2 + 0.0015**2) + 500
    return value, -0.005 + 1e-11 * 0.011 / (0.011**2 + 0.0015**2) ** 1.5


@pytest.mark.parametrize("where", ["a feature near the point", "lstm-layernorm T=200"])
def test_a_later_extrapolation_that_contradicts_the_best_replaces_it(where):
    """Where the first steps reach past the loss's Taylor series, their extrapolations agree by chance, off the
    derivative by 10-100 times their estimate; the smaller steps' ones contradict them, and are kept: the
    derivative within MARGIN times its estimate. lstm-layernorm's W_x[11, 2] at T=200, seed 14 (a norm's
    deviation falls to 0.006) failed its correct gradient by 2.5e-6 relative."""
    if where == "a feature near the point":
        array, index = np.array([0.55]), (0,)
        value, estimate = ridders(lambda: near_singular(array[0] - 0.55)[0], array, index)
        exact = near_singular(0.0)[1]
    else:
        instance, index = problem(module_of("lstm-layernorm"), 200, 3, 14), (11, 2)
        exact = instance.grads()["W_x"][index]
        value, estimate = ridders(lambda: instance.loss(), instance.params["W_x"], index)
    assert abs(value - exact) <= MARGIN * estimate, (value, exact, estimate)


@pytest.mark.parametrize(
    "name, steps, seed",
    [("elman", 20, 29), ("linear", 200, 0), ("elman-onehot", 5, 50), ("elman", 50, 3), ("linear", 50, 0)],
)
def test_cases_the_fixed_step_failed_now_pass(name, steps, seed):
    """Correct gradients that 1e-3-step fourth-order differences reported as FAIL (issue 6),
    every entry of every array: each passes, with a finite-difference estimate far below 1e-7."""
    rows = check(module_of(name), steps, 3, seed, max_entries=MAX_ENTRIES)
    assert all(row.ok for row in rows), table(rows)
    assert max(row.estimate for row in rows) < 1e-8, table(rows)


def first_nonfinite_state(module, steps, dtype):
    """(state, t): the first step at which a state of the forward pass in dtype is not finite."""
    params, xs, _, initial = problem(module, steps, 3, 0).cast(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        cache = module.forward(params, xs, **initial)[1]
    found = [(int(np.argmax(~np.isfinite(cache[k[:-1]]).reshape(steps + 1, -1).all(axis=1))), k[:-1]) for k in initial]
    return min((t, state) for t, state in found if t > 0)[::-1]


def test_an_overflowing_forward_pass_is_reported_where_it_overflows():
    """linear at T=2000 in float32: NonFiniteForward, one line naming the state, the first
    step where it is not finite, T and the dtype (no table of nan)."""
    module = module_of("linear")
    state, step = first_nonfinite_state(module, 2000, "float32")
    with pytest.raises(NonFiniteForward) as caught:
        check(module, 2000, dtype="float32")
    message = str(caught.value)
    assert "\n" not in message
    for fragment in ("float32", f"{state} is not finite", f"t={step} ", "T=2000"):
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_cli_reports_an_overflow_with_exit_4():
    result = bptt("check", "linear", "--steps", "2000", "--dtype", "float32")
    assert_error(result, 4, "float32", "t=", "T=2000")
    assert "nan" not in result.stdout


@pytest.mark.parametrize("steps", [13, 10**6, 10**9 - 1])
def test_randomized_truncation_beyond_enumeration_is_refused(steps):
    """T over 12 has more than 4096 keep patterns: the CLI exits 2 in one line and check() raises, before
    any work, for any T the CLI takes (2**T is not computed: at 10**6 it has too many digits to print, at
    10**9 - 1 it exhausts memory)."""
    result = bptt("check", "linear", "--steps", steps, "--truncate", "random:0.5", timeout=60)
    assert_error(result, 2, "2**T", f"T={steps} is too long", "T <= 12")
    with pytest.raises(TooManyPatterns, match=f"T={steps} is too long"):
        check(module_of("linear"), steps, truncate=("random", 0.5))


def test_cli_randomized_truncation_is_enumerated():
    """`check --truncate random:0.1` at T=6 says it enumerated all 64 patterns; every row is ok."""
    result = bptt("check", "elman", "--steps", "6", "--truncate", "random:0.1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 64 keep patterns" in result.stdout
    rows = table_rows(result.stdout)
    assert all(" ok" in rows[name] for name in ("U", "W", "V", "b", "c", "h0")), result.stdout


def test_table_shows_the_error_estimate():
    rows = check(module_of("linear"))
    lines = table(rows).splitlines()
    assert "FD error est." in lines[0] and len(lines) == 1 + len(rows)
    assert all(f"{row.estimate:.2e}" in line for row, line in zip(rows, lines[1:], strict=True))


def test_an_array_whose_gradient_is_zero_is_measured_against_the_largest_gradient():
    """A gradient of zeros (the gain of a norm over one unit) had its error estimate divided by the smallest float
    (5e+295 in the table): it is measured against the largest array's, as an entry below FLOOR of its own array's
    largest is against that; rounding noise passes, a gradient that should be zero and is not fails."""

    def rows(g):
        analytic, numeric = np.array([2.0, -1.0, *g]), np.array([2.0, -1.0, 1e-300, 0.0])
        return compare_arrays(["W", "g"], [2, 2], analytic, numeric, np.full(4, 1e-12), 1e-7, [2.0, 0.0])

    assert rows([0.0, 1e-20])[1].estimate == pytest.approx(1e-12 / (FLOOR * 2.0))
    assert rows([0.0, 1e-20])[1].ok and rows([0.0, 0.0])[1].error < 1e-290
    assert not rows([0.0, 1e-6])[1].ok
