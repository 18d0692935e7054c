"""JAX's modules in bounded memory (checkpoints=): loss_and_grads, backward through a cache and apply
under jax.grad and jax.jit equal full BPTT's gradients to 1e-14 (float64), in every truncation mode, for
the zoo's Elman RNN, LSTM, GRU and teacher-forced Elman-Jordan (every zoo model runs the same printed
code in NumPy and torch: test_checkpoints.py). The operations run one by one (jax.disable_jit), as in
test_random_cells.py: compiling every segment length would take minutes; one model is compiled, under jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support import module_of
from test_checkpoints import TRUNCATIONS, assert_equal_gradients, problem

jax.config.update("jax_enable_x64", True)


def arrays(values):
    params, xs, ys, initial = values
    convert = jnp.asarray
    return {k: convert(v) for k, v in params.items()}, convert(xs), convert(ys), {k: convert(v) for k, v in initial.items()}


@pytest.mark.slow
@pytest.mark.parametrize("truncate", TRUNCATIONS, ids=["full", "window", "chunk", "random"])
@pytest.mark.parametrize("name", ["elman", "lstm", "gru", "elman-jordan"])
def test_loss_and_grads_equal_full_bptt(name, truncate):
    module = module_of(f"{name}_jax")
    params, xs, ys, initial = arrays(problem(module_of(name), steps=7))
    rng = jax.random.key(7)
    with jax.disable_jit():
        loss, expected = module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng)
        other, got = module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng, checkpoints=3)
    assert abs(float(other) - float(loss)) <= 1e-14 * abs(float(loss))
    assert_equal_gradients(expected, got, 1e-14, ())


@pytest.mark.parametrize("name", ["elman", "lstm", "elman-jordan"])
def test_backward_and_apply(name):
    """backward(checkpoints=) through a whole cache, and jax.grad of apply(checkpoints=): its forward
    pass keeps the schedule's states only, its backward pass recomputes the rest."""
    module = module_of(f"{name}_jax")
    params, xs, ys, initial = arrays(problem(module_of(name), steps=7))
    forced = (ys,) if module.TEACHER_FORCED else ()
    with jax.disable_jit():
        outputs, cache = module.forward(params, xs, *forced, **initial)
        d_outputs = jnp.asarray(np.random.default_rng(3).standard_normal(outputs.shape))
        expected = module.backward(params, cache, d_outputs, ("window", 2))
        assert_equal_gradients(expected, module.backward(params, cache, d_outputs, ("window", 2), checkpoints=3), 1e-14, ())

        def loss(params, checkpoints):
            return jnp.sum(module.apply(params, xs, *forced, **initial, checkpoints=checkpoints) * d_outputs)

        assert_equal_gradients(jax.grad(loss)(params, None), jax.grad(loss)(params, 3), 1e-14, ())


def test_apply_under_jit_is_a_static_schedule_of_scans():
    """Compiled: the schedule is static (T and the budget are), each segment a scan; the same gradients."""
    module = module_of("elman_jax")
    params, xs, _, _ = arrays(problem(module_of("elman"), steps=12))
    d_outputs = jnp.asarray(np.random.default_rng(3).standard_normal((12, 3, 4)))

    def loss(params, checkpoints):
        return jnp.sum(module.apply(params, xs, checkpoints=checkpoints) * d_outputs)

    compiled = jax.jit(jax.grad(loss), static_argnums=1)
    text = jax.jit(jax.grad(loss), static_argnums=1).lower(params, 4).as_text()
    assert text.count("while") >= 2  # scans, not steps unrolled in Python
    assert_equal_gradients(compiled(params, None), compiled(params, 4), 1e-14, ())
