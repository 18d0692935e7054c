"""JAX's modules in bounded memory (checkpoints=): loss_and_grads, backward through a cache and apply under
jax.grad and jax.jit equal full BPTT's gradients to 1e-14 (float64).

What JAX prints of its own for checkpointing is proven on the one-hot Elman RNN in every truncation mode: the
adjoint carried in from the next segment, a value at t+1 read from it (its window pass reads s_{t+1}), keep's
weight from it, the age axis. The statements it prints are the same for every model, proven in NumPy and torch
(tests/generated/test_checkpoints.py, tests/backends/test_checkpoints_torch.py); apply's custom_vjp on the
teacher-forced Elman-Jordan RNN. Compiled, with T = 4 and 3 slots: one state kept, every segment of two steps
(a segment length is a compilation)."""

import pytest

pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import jax
import jax.numpy as jnp
import numpy as np

from bptt.tests.support.checkpoints import TRUNCATIONS, assert_equal_gradients, assert_same_loss, problem
from bptt.tests.support.modules import module_of

jax.config.update("jax_enable_x64", True)
STEPS, SLOTS = 4, 3


def arrays(name):
    params, xs, ys, initial = problem(module_of(name), steps=STEPS)
    convert = jnp.asarray
    return (
        {k: convert(v) for k, v in params.items()},
        convert(xs),
        convert(ys),
        {k: convert(v) for k, v in initial.items()},
    )


@pytest.mark.parametrize("mode", TRUNCATIONS)
def test_loss_and_grads_and_backward_equal_full_bptt(mode):
    module, truncate, rng = module_of("elman_onehot_jax"), TRUNCATIONS[mode], jax.random.key(7)
    params, xs, ys, initial = arrays("elman-onehot")
    loss, expected = module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng)
    other, got = module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng, checkpoints=SLOTS)
    assert_same_loss(loss, other)
    assert_equal_gradients(expected, got, 1e-14)
    outputs, cache = module.forward(params, xs, **initial)
    d_outputs = jnp.asarray(np.random.default_rng(3).standard_normal(outputs.shape))
    expected = module.backward(params, cache, d_outputs, truncate, rng)
    assert_equal_gradients(expected, module.backward(params, cache, d_outputs, truncate, rng, checkpoints=2), 1e-14)


def test_apply_under_jit_is_a_static_schedule_of_scans():
    """jax.jit of jax.grad through apply(checkpoints=): the schedule is static (T and the budget are), its
    forward pass keeps the schedule's states only, the backward pass recomputes the rest, each segment a
    scan; the same gradients (teacher forcing: apply takes ys)."""
    module = module_of("elman_jordan_jax")
    params, xs, ys, initial = arrays("elman-jordan")
    d_outputs = jnp.asarray(np.random.default_rng(3).standard_normal((STEPS, 2, 4)))

    def loss(params, checkpoints):
        return jnp.sum(module.apply(params, xs, ys, **initial, checkpoints=checkpoints) * d_outputs)

    compiled = jax.jit(jax.grad(loss), static_argnums=1)
    assert compiled.lower(params, SLOTS).as_text().count("while") >= 2  # scans, not steps unrolled in Python
    assert_equal_gradients(compiled(params, None), compiled(params, SLOTS), 1e-14)
