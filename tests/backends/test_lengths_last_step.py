"""at="last" (a sequence classifier's loss, of each sequence's output at its own last step), in the NumPy, torch and JAX
modules, with and without lengths=: the batch's loss and gradients equal those of each sequence alone, taken from
the oracle (tests/support/oracle.py, no codegen): the loss of a sequence's last step L alone is the oracle's loss of
its first L steps less that of its first L - 1 (the model is causal, and every truncation mode cuts the first L - 1
steps' flows alike in both), and so is each gradient."""

import pytest

pytest.importorskip("torch", reason="the oracle needs torch (pip install 'bptt[torch]')")

import functools
from importlib.util import find_spec

import numpy as np

from bptt.derive.models import load
from bptt.tests.backends.test_lengths_numpy import XDIST_GROUP, zoo_alone, zoo_values  # noqa: F401 (one unit)
from bptt.tests.support import oracle
from bptt.tests.support.modules import module_of
from bptt.tests.support.padded import TOL, InNumPy, _close, add_alone, lengths_drawn, padded_values
from bptt.tests.support.zoo import supporting

T, B = 6, 4
BACKENDS = ["numpy", "torch", pytest.param("jax", marks=pytest.mark.skipif(not find_spec("jax"), reason="no jax"))]
MODES = [None, ("window", 2), ("chunk", 2)]
ZOO = supporting("causal")


model_named = functools.cache(load)  # each zoo model built once for the file's tests (a Model is immutable)


def named_module(name, backend):
    return name if backend == "numpy" else f"{name}_{backend}"


def last_step_alone(model, params, xs, ys, initial, length, truncate, first=None):
    """(loss, grads, scales) of one sequence's loss at its step `length` only, from the oracle's runs of its first
    `length` (first, if given) and `length - 1` steps (a mean loss's sums are its means times their steps); scales:
    the largest entry of each gradient subtracted, which the difference's rounding is relative to."""
    if first is None:
        first = oracle.run(model, params, xs[:length], ys[:length], initial, truncate)
    weight = length if model.mean else 1
    loss, grads = weight * first.loss, {key: weight * value for key, value in first.grads.items()}
    scales = {key: np.abs(value).max(initial=0) for key, value in grads.items()}
    if length > 1:
        before = oracle.run(model, params, xs[: length - 1], ys[: length - 1], initial, truncate)
        weight = length - 1 if model.mean else 1
        loss -= weight * before.loss
        grads = {key: value - weight * before.grads[key] for key, value in grads.items()}
        scales = {key: max(scale, weight * np.abs(before.grads[key]).max(initial=0)) for key, scale in scales.items()}
    return loss, grads, scales


def junked_before_last(values, lengths, forced):
    """values with junk at every padded step, and (unless the model reads ys in its steps) nan targets or labels
    out of range at every step but each sequence's last: at="last" must read ys there only."""
    params, xs, ys, initial = padded_values(values, lengths, 10**6)
    if not forced:
        before = np.arange(T)[:, None] < np.asarray(lengths) - 1
        ys[before] = -(10**6) if np.issubdtype(ys.dtype, np.integer) else np.nan
    return params, xs, ys, initial


@pytest.mark.parametrize("padded", [True, False], ids=["lengths", "no-lengths"])
@pytest.mark.parametrize("truncate", MODES, ids=lambda mode: "full" if mode is None else mode[0])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ZOO)
def test_last_step_loss_is_each_sequence_last_step_alone(name, backend, truncate, padded):
    assert_last_step_as_alone(name, backend, truncate, padded)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["lstm", "linear", "jordan"])
def test_last_step_loss_with_checkpoints(name, backend):
    assert_last_step_as_alone(name, backend, ("chunk", 2), True, checkpoints=2)


def batch(name, padded):
    """(model, lengths, params, xs, junked ys, the oracle's ys, initial) of the tests' batch of a zoo model."""
    model = model_named(name)
    lengths = lengths_drawn(np.random.default_rng(len(name)), T, B) if padded else np.full(B, T)
    values = zoo_values(model, len(name))
    params, xs, junked, initial = junked_before_last(values, lengths, bool(model.teacher_forcing))
    return model, lengths, params, xs, junked, values[2], initial  # the oracle reads every step's target


@functools.cache
def each_sequence_alone(name, truncate, padded):
    """[(loss, grads, scales) of sequence b's last step alone (last_step_alone), for each b]: the oracle's, computed
    once for the backends that are compared with it (the arguments fix the batch and the truncation), read-only. A
    padded batch's runs of each sequence's own steps are test_lengths_numpy.py's (zoo_alone: the same batch)."""
    model, lengths, params, xs, _, ys, initial = batch(name, padded)
    firsts = zoo_alone(name, len(name), truncate) if padded else [None] * len(lengths)
    found = []
    for b, (length, first) in enumerate(zip(lengths, firsts, strict=True)):
        alone = {seq.name: initial[seq.name][b : b + 1] for seq in model.states}
        one = slice(b, b + 1)
        loss, grads, scales = last_step_alone(model, params, xs[:, one], ys[:, one], alone, length, truncate, first)
        for value in grads.values():
            value.setflags(write=False)
        found.append((loss, grads, scales))
    return found


def assert_last_step_as_alone(name, backend, truncate, padded, checkpoints=None):
    """loss_and_grads(at="last") of a batch (padded or not) against each sequence's last step alone (oracle)."""
    model, lengths, params, xs, junked, _, initial = batch(name, padded)
    module = InNumPy(module_of(named_module(model.name, backend)))
    states = {f"{seq.name}0": initial[seq.name] for seq in model.states}
    named = {"lengths": lengths} if padded else {}
    loss, grads = module.loss_and_grads(params, xs, junked, truncate, checkpoints, **states, **named, at="last")
    expected_loss, expected = 0.0, {key: np.zeros_like(value) for key, value in grads.items()}
    scales = dict.fromkeys(grads, 0.0)
    for b, (loss_b, grads_b, scales_b) in enumerate(each_sequence_alone(name, truncate, padded)):
        expected_loss += loss_b / B
        scales = {key: max(scale, scales_b[key] / B) for key, scale in scales.items()}
        add_alone(expected, grads_b, module.STATES, b, B)
    _close("loss", loss, expected_loss)
    for key, value in expected.items():
        error = np.abs(grads[key] - value).max() / max(scales[key], np.finfo(float).tiny)
        assert error <= TOL, f"gradient {key}: differs by {error:.3e} relative to the oracle's gradients' largest entry"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["elman", "linear"])
def test_last_step_losses_are_the_last_steps_of_losses(name, backend):
    """losses(..., at="last") keeps each sequence's last step's loss of losses(...) and zeroes the rest; their sum
    over the batch is loss_and_grads' loss times B."""
    model = model_named(name)
    lengths = lengths_drawn(np.random.default_rng(5), T, B)
    params, xs, ys, _ = zoo_values(model, 5)
    module = InNumPy(module_of(named_module(model.name, backend)))
    outputs, _ = module.forward(params, xs, ys, lengths=lengths)
    raw = module_of(named_module(model.name, backend))
    every = module._out(raw.losses(module._in(outputs), module._in(ys), lengths=lengths))
    last = module._out(raw.losses(module._in(outputs), module._in(ys), lengths=lengths, at="last"))
    at_last = np.arange(T)[:, None] == lengths - 1
    assert np.array_equal(last, np.where(at_last, every, 0))
    loss, _ = module.loss_and_grads(params, xs, ys, lengths=lengths, at="last")
    _close("loss", loss, last.sum() / B)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("at", ["first", "LAST", 1])
def test_bad_at_is_refused_in_one_line(backend, at):
    module = InNumPy(module_of(named_module("elman", backend)))
    params, xs, ys, _ = zoo_values(model_named("elman"), 0)
    with pytest.raises(ValueError, match=r"^at must be None .* or 'last' .*; got") as error:
        module.loss_and_grads(params, xs, ys, at=at)
    assert "\n" not in str(error.value)


def test_each_sequence_alone_is_cached_by_model_truncation_and_lengths():
    """The oracle's values shared by the backends answer each key with its own batch and truncation: equal to a fresh
    computation once the other keys are cached too, and differing between the keys."""
    keys = [("elman", None, True), ("elman", ("window", 2), True), ("elman", None, False), ("jordan", None, True)]
    cached = [each_sequence_alone(*key) for key in keys]

    def same(first, second):
        return len(first) == len(second) and all(
            a[0] == b[0] and a[1].keys() == b[1].keys() and all(np.array_equal(a[1][k], b[1][k]) for k in a[1])
            for a, b in zip(first, second, strict=True)
        )

    for key, found in zip(keys, cached, strict=True):
        assert same(found, each_sequence_alone.__wrapped__(*key)), key
    assert not any(same(cached[i], cached[j]) for i in range(len(keys)) for j in range(i))
