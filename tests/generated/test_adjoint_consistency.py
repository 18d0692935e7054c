"""Layer 4 of the proof: backward is the exact adjoint of forward's linearization.

The dot-product and Taylor tests catch accumulation bugs (a missing term, a
gradient summed once too often) that a loose tolerance could hide."""

import numpy as np
import pytest

from bptt.app.verify.check import STENCIL
from bptt.derive.models import names
from bptt.tests.support.modules import forward, module_of

NAMES = names()
SEEDS = (0, 1, 2)


def problem(module, seed, T=6, B=3):
    """Parameters, inputs, targets, initial state at distinct sizes 2, 3, 4, ..."""
    rng = np.random.default_rng(seed)
    sizes = {size: 2 + i for i, size in enumerate(module.SIZES)}
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, T, B, **sizes)
    initial = {key: 0.5 * rng.standard_normal((B, sizes[size])) for key, size in module.STATES.items()}
    return params, xs, ys, initial, rng


def split(module, point):
    """{params and initial states} -> (params, initial states)."""
    return {k: point[k] for k in module.PARAMS}, {k: point[k] for k in module.STATES}


def step(point, direction, e):
    return {k: point[k] + e * direction[k] for k in point}


def inner(a, b):
    """<a, b> summed over every array of two dicts with the same keys."""
    return sum(float(np.vdot(a[k], b[k])) for k in a)


def unit(direction):
    norm = np.sqrt(inner(direction, direction))
    return {k: a / norm for k, a in direction.items()}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", NAMES)
def test_dot_product(name, seed):
    """<J v, w> = <v, J^T w> for the map (params, h0) -> outputs, all parameters at once:
    J v by fourth-order central differences of forward, J^T w by backward(params, cache, w)."""
    module = module_of(name)
    params, xs, ys, initial, rng = problem(module, seed)
    point = {**params, **initial}
    v = unit({k: rng.standard_normal(a.shape) for k, a in point.items()})
    outputs, cache = forward(module, params, xs, ys, **initial)
    w = rng.standard_normal(outputs.shape)

    def outputs_at(e):
        p, h = split(module, step(point, v, e))
        return forward(module, p, xs, ys, **h)[0]

    eps = 1e-3
    jv = sum(weight * outputs_at(s * eps) for s, weight in STENCIL) / (12 * eps)
    jtw = module.backward(params, cache, w)
    left, right = float(np.vdot(jv, w)), inner(v, jtw)
    error = abs(left - right) / max(abs(left), abs(right))
    assert error <= 1e-8, f"{name}: <Jv, w> = {left!r} but <v, J^T w> = {right!r} (relative {error:.2e})"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", NAMES)
def test_taylor(name, seed):
    """Along a random unit direction v, L(theta + e v) - L(theta) shrinks like e (slope 1)
    and L(theta + e v) - L(theta) - e <grad, v> like e^2 (slope 2), for e over three decades from 0.1 (or from
    where the remainder is quadratic, quadratic_from).

    v is a random unit vector plus the unit gradient, normalized, so that <grad, v> is not
    accidentally near zero (which would bend the slope-1 line at e = 0.1)."""
    module = module_of(name)
    params, xs, ys, initial, rng = problem(module, seed)
    point = {**params, **initial}
    loss, grads = module.loss_and_grads(params, xs, ys, **initial)
    noise, along = unit({k: rng.standard_normal(a.shape) for k, a in point.items()}), unit(grads)
    v = unit({k: noise[k] + along[k] for k in point})
    slope = inner(grads, v)

    def loss_at(e):
        p, h = split(module, step(point, v, e))
        return module.loss_and_grads(p, xs, ys, **h)[0]

    es = np.logspace(0, -3, 7) * quadratic_from(lambda e: abs(loss_at(e) - loss - e * slope))
    first = np.array([abs(loss_at(e) - loss) for e in es])
    second = np.array([abs(loss_at(e) - loss - e * slope) for e in es])
    order1 = np.polyfit(np.log(es), np.log(first), 1)[0]
    order2 = np.polyfit(np.log(es), np.log(second), 1)[0]
    assert abs(order1 - 1) <= 0.1, f"{name}: |L(θ+ev) - L(θ)| has slope {order1:.3f}, not 1: {first}"
    assert abs(order2 - 2) <= 0.1, f"{name}: Taylor remainder has slope {order2:.3f}, not 2: {second}"


def quadratic_from(remainder, starts=5):
    """The first step of the Taylor test: 0.1, or the first of 10^-1.5, 10^-2, ... (at most `starts` in all) from
    which the remainder falls by at least 5 in each of the next six half-decades (a quadratic one by 10, a linear one
    by 3.2). A badly conditioned loss (a norm's deviation of 0.014) bends within 0.1; a wrong gradient's remainder is
    linear at small steps, so no start qualifies and the test runs from 0.1 and fails."""
    for k in range(starts):
        es = 10 ** (-1 - np.arange(k, k + 7) / 2)
        found = np.array([remainder(e) for e in es])
        if (found[:-1] >= 5 * found[1:]).all():
            return es[0]
    return 0.1


@pytest.mark.parametrize("name", NAMES)
def test_backward_is_linear_in_d_outputs(name):
    """backward(a w1 + b w2) = a backward(w1) + b backward(w2)."""
    module = module_of(name)
    params, xs, ys, initial, rng = problem(module, seed=8)
    outputs, cache = forward(module, params, xs, ys, **initial)
    w1, w2 = rng.standard_normal(outputs.shape), rng.standard_normal(outputs.shape)
    a, b = 0.7, -2.3
    combined = module.backward(params, cache, a * w1 + b * w2)
    g1, g2 = module.backward(params, cache, w1), module.backward(params, cache, w2)
    for key in combined:
        expected = a * g1[key] + b * g2[key]
        scale = np.abs(expected).max()
        assert np.allclose(combined[key], expected, rtol=1e-12, atol=1e-13 * scale), (
            f"{name} d{key}: backward(a w1 + b w2) = {combined[key]} but a g1 + b g2 = {expected}"
        )


def global_norm(grads):
    return np.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads.values()))


@pytest.mark.parametrize("dtype", (np.float64, np.float32))
@pytest.mark.parametrize("name", NAMES)
def test_clip_grads_above_theta(name, dtype):
    """A gradient with global norm above g_max comes back with norm exactly g_max,
    pointing the same way, in the same dtype."""
    module = module_of(name)
    params, xs, ys, initial, _ = problem(module, seed=9)
    _, grads = module.loss_and_grads(params, xs, ys, **initial)
    grads = {k: g.astype(dtype) for k, g in grads.items()}
    norm = global_norm(grads)
    g_max = norm / 3
    clipped = module.clip_grads(grads, g_max)
    rtol = 1e-12 if dtype == np.float64 else 1e-6
    assert sorted(clipped) == sorted(grads)
    assert global_norm(clipped) == pytest.approx(g_max, rel=rtol)
    for key, g in grads.items():
        assert clipped[key].dtype == dtype
        np.testing.assert_allclose(clipped[key], g * (g_max / norm), rtol=rtol, atol=rtol * g_max, err_msg=key)


@pytest.mark.parametrize("name", NAMES)
def test_clip_grads_below_theta_is_unchanged(name):
    """A gradient with global norm at most g_max comes back unchanged."""
    module = module_of(name)
    params, xs, ys, initial, _ = problem(module, seed=10)
    _, grads = module.loss_and_grads(params, xs, ys, **initial)
    for g_max in (2 * global_norm(grads), global_norm(grads)):
        clipped = module.clip_grads(grads, g_max)
        for key, g in grads.items():
            np.testing.assert_allclose(clipped[key], g, rtol=1e-15, err_msg=key)


@pytest.mark.parametrize("g_max", (0, 0.0, -1.0, float("nan")))
@pytest.mark.parametrize("name", NAMES)
def test_clip_grads_rejects_non_positive_theta(name, g_max):
    """g_max <= 0 (or NaN) is a ValueError that shows g_max."""
    module = module_of(name)
    params, xs, ys, initial, _ = problem(module, seed=11)
    _, grads = module.loss_and_grads(params, xs, ys, **initial)
    with pytest.raises(ValueError, match=r"(?=.*g_max)(?=.*" + str(g_max).replace("-", r"\-") + ")"):
        module.clip_grads(grads, g_max)
