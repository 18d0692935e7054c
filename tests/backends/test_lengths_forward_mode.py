"""forward_mode_grads(..., lengths=) (real-time recurrent learning of a right-padded batch), in NumPy, torch and
JAX: its loss and every gradient equal loss_and_grads' with the same lengths (full BPTT) and the oracle's of each
sequence run alone on its own steps, averaged over the batch, to 1e-12 in float64; the padded steps hold junk
(nan inputs and targets, labels out of range) that must never be read."""

import numpy as np
import pytest

pytest.importorskip("torch", reason="the oracle needs torch (pip install 'bptt[torch]')")

from bptt.derive.models import load
from bptt.tests.backends.test_lengths_numpy import B, T, zoo_values
from bptt.tests.support import oracle
from bptt.tests.support.modules import module_of
from bptt.tests.support.padded import TOL, InNumPy, add_alone, lengths_drawn, padded_values
from bptt.tests.support.zoo import supporting

SUFFIX = {"numpy": "", "torch": "_torch", "jax": "_jax"}
JAX_MODELS = ["jordan", "lstm"]  # a JAX module compiles per shape: teacher forcing and two states, not all eight
CASES = [(name, backend) for backend in ("numpy", "torch") for name in supporting("forward_mode_grads")]
CASES += [(name, "jax") for name in JAX_MODELS]


def alone(model, values, lengths):
    """(loss, grads) of the padded batch as the oracle gives them: each sequence alone, averaged over the batch."""
    params, xs, ys, initial = values
    loss, grads = 0.0, None
    for b, length in enumerate(lengths):
        one = (slice(None, length), slice(b, b + 1))
        truth = oracle.run(model, params, xs[one], ys[one], {name: value[b : b + 1] for name, value in initial.items()})
        if grads is None:
            grads = {key: np.zeros((len(lengths), *value.shape[1:])) for key, value in truth.grads.items()}
            grads |= {key: np.zeros_like(value) for key, value in truth.grads.items() if key in params}
        add_alone(grads, truth.grads, {f"{seq.name}0" for seq in model.states}, b, len(lengths))
        loss += truth.loss / len(lengths)
    return loss, grads


def _close(what, got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    error = np.abs(got - want).max(initial=0) / max(1.0, np.abs(want).max(initial=0))
    assert error <= TOL, f"{what}: differs by {error:.3e}"


@pytest.mark.parametrize(("name", "backend"), CASES)
def test_forward_mode_of_a_padded_batch_is_each_sequence_alone(name, backend):
    model = load(name)
    lengths = lengths_drawn(np.random.default_rng(len(name) + 1), T, B)
    values = zoo_values(model, seed=len(name))
    params, xs, ys, initial = padded_values(values, lengths, 10**6)
    module = InNumPy(module_of(model.name + SUFFIX[backend]))
    states = module._in({f"{seq.name}0": initial[seq.name] for seq in model.states})
    arrays = [module._in(array) for array in (params, xs, ys)]
    if backend == "jax":
        lengths = module.to(lengths)
    forward_loss, forward_grads = module._out(module.module.forward_mode_grads(*arrays, **states, lengths=lengths))
    loss, grads = module._out(module.module.loss_and_grads(*arrays, **states, lengths=lengths))
    expected_loss, expected = alone(model, values, np.asarray(lengths))
    _close("loss (loss_and_grads)", forward_loss, loss)
    _close("loss (oracle alone)", forward_loss, expected_loss)
    assert set(forward_grads) == set(expected)
    for key, value in expected.items():
        _close(f"gradient {key} (loss_and_grads)", forward_grads[key], grads[key])
        _close(f"gradient {key} (oracle alone)", forward_grads[key], value)


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_forward_mode_refuses_bad_lengths_in_one_line(backend):
    model = load("elman")
    params, xs, ys, _ = zoo_values(model, seed=0)
    module = InNumPy(module_of("elman" + SUFFIX[backend]))
    with pytest.raises(ValueError, match="lengths") as error:
        module.module.forward_mode_grads(*map(module._in, (params, xs, ys)), lengths=np.array([T + 1] * B))
    assert "\n" not in str(error.value)


def test_jax_forward_mode_takes_lengths_traced_under_jit():
    """Under jax.jit, lengths are traced: a second batch's lengths run the same compiled program, and its gradients
    are loss_and_grads' with those lengths."""
    jax = pytest.importorskip("jax")
    module = InNumPy(module_of("elman_jax"))
    params, xs, ys = (module._in(array) for array in zoo_values(load("elman"), seed=2)[:3])
    compiled = jax.jit(lambda params, lengths: module.module.forward_mode_grads(params, xs, ys, lengths=lengths))
    compiled(params, module.to(np.full(B, T)))
    before = compiled._cache_size()
    lengths = module.to(lengths_drawn(np.random.default_rng(2), T, B))
    loss, grads = compiled(params, lengths)
    assert compiled._cache_size() == before, "new lengths compiled a new program"
    want_loss, want = module.module.loss_and_grads(params, xs, ys, lengths=lengths)
    _close("loss", loss, want_loss)
    for key, value in want.items():
        _close(f"gradient {key}", grads[key], value)


LAST_CASES = [(name, backend) for backend in ("numpy", "torch") for name in ("elman", "jordan", "lstm")]


@pytest.mark.parametrize(("name", "backend"), [*LAST_CASES, ("lstm", "jax")])
def test_forward_mode_of_last_step_losses_is_loss_and_grads(name, backend):
    """at="last" (a sequence classifier's loss, each sequence's last step only): forward_mode_grads equals
    loss_and_grads with the same lengths and at; the targets of the other steps (junk here, unless the model feeds
    them in) are never read."""
    model = load(name)
    lengths = lengths_drawn(np.random.default_rng(3), T, B)
    params, xs, ys, initial = padded_values(zoo_values(model, seed=3), lengths, 10**6)
    if not module_of(model.name).TEACHER_FORCED:
        unread = np.arange(T)[:, None] != np.asarray(lengths) - 1
        ys[unread] = -(10**6) if np.issubdtype(ys.dtype, np.integer) else np.nan
    module = InNumPy(module_of(model.name + SUFFIX[backend]))
    states = module._in({f"{seq.name}0": initial[seq.name] for seq in model.states})
    arrays = [module._in(array) for array in (params, xs, ys)]
    lengths = module.to(lengths) if backend == "jax" else lengths
    named = dict(states, lengths=lengths, at="last")
    forward_loss, forward_grads = module._out(module.module.forward_mode_grads(*arrays, **named))
    loss, grads = module._out(module.module.loss_and_grads(*arrays, **named))
    _close("loss", forward_loss, loss)
    assert set(forward_grads) == set(grads)
    for key, value in grads.items():
        assert np.isfinite(value).all(), key
        _close(f"gradient {key}", forward_grads[key], value)
