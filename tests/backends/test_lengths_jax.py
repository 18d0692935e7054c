"""lengths= in the JAX modules (forward, backward, loss_and_grads, losses, apply): a right-padded batch equals
each of its sequences run alone through the same module and through the oracle (tests/support/padded.py), for
four zoo models (softmax and squared error, a mean loss, teacher forcing, two states; a JAX model's ops compile
for every sequence length, so not all eight: NumPy's and torch's tests take every one), in full BPTT, window and
chunk truncation and with checkpoints; lengths are traced under jit (new lengths compile nothing new) and vmap
maps over them; apply's gradients through a padded batch are loss_and_grads'; bad lengths are refused in one
line. (Random truncation's keep pattern is drawn from a JAX key, whose T draws do not begin with the draws a
shorter sequence alone would take: not compared here.)"""

import pytest

jax = pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np

from bptt.derive.models import load
from bptt.tests.backends.test_lengths_numpy import BAD, XDIST_GROUP, B, T, zoo_alone, zoo_values  # noqa: F401 (one unit)
from bptt.tests.support.jax_eager import eagerly, on_device
from bptt.tests.support.modules import module_of
from bptt.tests.support.padded import assert_padded_as_alone, lengths_drawn

MODES = [None, ("window", 2), ("chunk", 2)]
MODELS = ["elman", "linear", "jordan", "lstm"]


@pytest.mark.parametrize("truncate", MODES, ids=lambda mode: "full" if mode is None else mode[0])
@pytest.mark.parametrize("name", MODELS)
def test_zoo_padded_batch_is_each_sequence_alone(name, truncate):
    model = load(name)
    lengths = on_device(lengths_drawn(np.random.default_rng(len(name)), T, B))
    module = module_of(f"{model.name}_jax")
    truths = zoo_alone(name, len(name), truncate)
    with eagerly(module):
        assert_padded_as_alone(module, model, zoo_values(model, len(name)), lengths, truncate, truths=truths)


@pytest.mark.parametrize("name", ["elman", "lstm"])
def test_zoo_padded_batch_with_checkpoints(name):
    model = load(name)
    lengths = on_device(lengths_drawn(np.random.default_rng(3), T, B))
    module, truths = module_of(f"{model.name}_jax"), zoo_alone(name, 3, ("chunk", 2))
    with eagerly(module):
        assert_padded_as_alone(module, model, zoo_values(model, 3), lengths, ("chunk", 2), 2, truths)


def _arrays(name, seed=0):
    params, xs, ys, _ = zoo_values(load(name), seed)
    return {k: on_device(v) for k, v in params.items()}, on_device(xs), on_device(ys)


def test_apply_gradients_are_loss_and_grads_and_lengths_are_traced():
    """jax.grad through apply(lengths=) of the padded loss gives loss_and_grads(lengths=)'s gradients; under jit,
    two batches' lengths run one compiled program; vmap over a leading axis of lengths works."""
    module = module_of("elman_jax")
    params, xs, ys = _arrays("elman")
    lengths = on_device(lengths_drawn(np.random.default_rng(5), T, B))

    def loss(params, lengths):
        return module.losses(module.apply(params, xs, lengths=lengths), ys, lengths).sum() / B

    expected_loss, expected = module.loss_and_grads(params, xs, ys, lengths=lengths)
    value, grads = jax.jit(jax.value_and_grad(loss))(params, lengths)
    assert abs(float(value - expected_loss)) <= 1e-12
    for key in module.PARAMS:
        assert np.allclose(grads[key], expected[key], rtol=1e-12, atol=1e-14), key
    compiled = jax.jit(loss)
    compiled(params, lengths)
    before = compiled._cache_size()
    compiled(params, on_device([1, 2, 3, 4]))
    assert compiled._cache_size() == before, "new lengths compiled a new program"
    stacked = jnp.stack([lengths, jnp.full(B, T)])
    mapped = jax.vmap(loss, in_axes=(None, 0))(params, stacked)
    assert np.allclose(mapped, [loss(params, lengths), loss(params, jnp.full(B, T))], rtol=1e-12)


@pytest.mark.parametrize(("lengths", "message"), BAD, ids=lambda value: repr(value)[:20])
def test_bad_lengths_are_refused_in_one_line(lengths, message):
    module = module_of("elman_jax")
    params, xs, ys = _arrays("elman")
    lengths = on_device(lengths) if isinstance(lengths, np.ndarray) else lengths
    for call in (
        lambda: module.forward(params, xs, lengths=lengths),
        lambda: module.loss_and_grads(params, xs, ys, lengths=lengths),
        lambda: module.losses(module.forward(params, xs)[0], ys, lengths=lengths),
        lambda: module.apply(params, xs, lengths=lengths),
    ):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_apply_with_lengths_and_checkpoints_is_refused_in_one_line():
    module = module_of("elman_jax")
    params, xs, _ = _arrays("elman")
    with pytest.raises(ValueError, match=r"^apply\(lengths=...\) is not supported with checkpoints= yet"):
        module.apply(params, xs, lengths=jnp.full(B, T), checkpoints=2)
