"""JAX's apply for a model with reverse-time states: a jax.custom_vjp whose backward is the derived BPTT of the
sweeps, under jit, grad and vmap, as tests/backends/test_backend_jax.py proves it for forward-only models: jax.grad
of a loss through apply, vmapped over two sequences and jitted, equals jax.grad through the plain forward and the
NumPy module's summed gradients, in float64 to 1e-12; with lengths, apply's outputs and gradients are the padded
NumPy call's; xs get a zero cotangent, as apply's docstring says."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bptt.tests.support.modules import module_of
from bptt.tests.support.zoo import WITH_REVERSE_STATES

jax.config.update("jax_enable_x64", True)

T, B, N = 5, 3, 2


def _problem(name, seed=0):
    """The NumPy and JAX modules, params and N sequences (xs, ys, initial states) as NumPy arrays."""
    numpy_module, jax_module = module_of(name), module_of(name + "_jax")
    rng = np.random.default_rng(seed)
    sizes = {size: 2 + k for k, size in enumerate(numpy_module.SIZES)}
    params = numpy_module.init_params(rng, **sizes)
    drawn = [numpy_module.random_inputs(rng, T, B, **sizes) for _ in range(N)]
    initial = [
        {key: 0.5 * rng.standard_normal((B, sizes[size])) for key, size in numpy_module.STATES.items()} for _ in drawn
    ]
    return numpy_module, jax_module, params, drawn, initial


def _relative(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    return np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-300)


@pytest.mark.parametrize("name", [name.replace("-", "_") for name in WITH_REVERSE_STATES])
def test_apply_under_jit_vmap_and_grad(name):
    numpy_module, module, params, drawn, initial = _problem(name)
    expected = [
        numpy_module.loss_and_grads(params, x, y, **start)[1] for (x, y), start in zip(drawn, initial, strict=True)
    ]
    summed = {key: sum(g[key] for g in expected) for key in params}
    summed.update({key: np.stack([g[key] for g in expected]) for key in numpy_module.STATES})
    xs, ys = (jnp.asarray(np.stack([pair[k] for pair in drawn])) for k in (0, 1))
    starts = {key: jnp.asarray(np.stack([start[key] for start in initial])) for key in numpy_module.STATES}

    def batch_loss(run):
        def loss(p, xs, ys, starts):
            outputs = jax.vmap(run, in_axes=(None, 0, 0))(p, xs, starts)
            return jax.vmap(module.losses)(outputs, ys).sum() / B

        return loss

    def through_apply(p, x, start):
        return module.apply(p, x, **start)

    def through_forward(p, x, start):
        return module.forward(p, x, **start)[0]

    def both(p, xs, ys, starts):
        by_apply = jax.grad(batch_loss(through_apply), argnums=(0, 3))(p, xs, ys, starts)
        by_forward = jax.grad(batch_loss(through_forward), argnums=(0, 3))(p, xs, ys, starts)
        return by_apply, by_forward

    results = jax.jit(both)({k: jnp.asarray(v) for k, v in params.items()}, xs, ys, starts)
    for label, (by_param, by_state) in zip(("apply", "forward"), results, strict=True):
        for key, value in {**by_param, **by_state}.items():
            assert _relative(value, summed[key]) <= 1e-12, (label, key, _relative(value, summed[key]))


@pytest.mark.parametrize("name", [name.replace("-", "_") for name in WITH_REVERSE_STATES])
def test_apply_with_lengths_is_the_padded_call(name):
    """apply(lengths=...) under jit: its outputs are forward's with the lengths (zero at padded steps), and
    jax.grad of the loss through it is the NumPy module's loss_and_grads with the lengths; new lengths compile
    nothing new (a traced argument)."""
    numpy_module, module, params, drawn, initial = _problem(name, seed=1)
    (x, y), start = drawn[0], initial[0]
    lengths = np.array([T, 2, 1])
    outputs, _ = numpy_module.forward(params, x, **start, lengths=lengths)
    expected = numpy_module.loss_and_grads(params, x, y, **start, lengths=lengths)[1]

    @jax.jit
    def run(p, start, lengths):
        def loss(p, start):
            return module.losses(module.apply(p, jnp.asarray(x), **start, lengths=lengths), y, lengths).sum() / B

        return module.apply(p, jnp.asarray(x), **start, lengths=lengths), jax.grad(loss, argnums=(0, 1))(p, start)

    as_jax = {k: jnp.asarray(v) for k, v in params.items()}
    got, (by_param, by_state) = run(as_jax, {k: jnp.asarray(v) for k, v in start.items()}, jnp.asarray(lengths))
    assert _relative(got, outputs) <= 1e-12 and not np.any(np.asarray(got)[2:, 1])
    for key, value in {**by_param, **by_state}.items():
        assert _relative(value, expected[key]) <= 1e-12, (key, _relative(value, expected[key]))
    compiled = run._cache_size()
    run(as_jax, {k: jnp.asarray(v) for k, v in start.items()}, jnp.asarray([1, T, 3]))
    assert run._cache_size() == compiled


@pytest.mark.parametrize("name", [name.replace("-", "_") for name in WITH_REVERSE_STATES])
def test_apply_gives_the_inputs_a_zero_gradient(name):
    _, module, params, drawn, _ = _problem(name)
    params, xs = {k: jnp.asarray(v) for k, v in params.items()}, jnp.asarray(drawn[0][0])
    through_apply = jax.grad(lambda x: module.apply(params, x).sum())(xs)
    through_forward = jax.grad(lambda x: module.forward(params, x)[0].sum())(xs)
    assert not jnp.any(through_apply) and jnp.any(through_forward)
