"""lengths= in the torch modules' functions (forward, backward, loss_and_grads, losses): a right-padded batch
equals each of its sequences run alone through the same module and through the oracle (tests/support/padded.py),
for every zoo model, in full BPTT, window, chunk and random truncation, with checkpoints and with compile=True
(its steps run uncompiled); Model(xs, lengths=) and Model.loss(..., lengths=) give loss_and_grads' gradients; bad
lengths are refused in one line. PackedSequence: test_lengths_packed.py."""

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import numpy as np

from bptt.derive.models import load
from bptt.runtime.common import _param_sizes
from bptt.tests.backends.test_lengths_numpy import (  # noqa: F401 (XDIST_GROUP: one unit)
    BAD,
    MODES,
    XDIST_GROUP,
    B,
    T,
    zoo_alone,
    zoo_values,
)
from bptt.tests.support.modules import module_of
from bptt.tests.support.padded import assert_padded_as_alone, lengths_drawn
from bptt.tests.support.zoo import supporting


@pytest.mark.parametrize("truncate", MODES, ids=lambda mode: "full" if mode is None else mode[0])
@pytest.mark.parametrize("name", supporting("truncate"))
def test_zoo_padded_batch_is_each_sequence_alone(name, truncate):
    model = load(name)
    lengths = torch.as_tensor(lengths_drawn(np.random.default_rng(len(name)), T, B))
    module, truths = module_of(f"{model.name}_torch"), zoo_alone(name, len(name), truncate)
    assert_padded_as_alone(module, model, zoo_values(model, len(name)), lengths, truncate, truths=truths)


@pytest.mark.parametrize("checkpoints", [1, 2])
@pytest.mark.parametrize("name", ["elman", "lstm", "linear", "jordan"])
def test_zoo_padded_batch_with_checkpoints(name, checkpoints):
    model = load(name)
    lengths = torch.as_tensor(lengths_drawn(np.random.default_rng(3), T, B))
    module = module_of(f"{model.name}_torch")
    truths = zoo_alone(name, 3, ("chunk", 2))
    assert_padded_as_alone(module, model, zoo_values(model, 3), lengths, ("chunk", 2), checkpoints, truths)


@pytest.mark.parametrize(("lengths", "message"), BAD, ids=lambda value: repr(value)[:20])
def test_bad_lengths_are_refused_in_one_line(lengths, message):
    module = module_of("elman_torch")
    params, xs, ys, _ = (torch.as_tensor(a) if not isinstance(a, dict) else a for a in zoo_values(load("elman"), 0))
    params = {k: torch.as_tensor(v) for k, v in params.items()}
    lengths = torch.as_tensor(lengths) if isinstance(lengths, np.ndarray) else lengths
    for call in (
        lambda: module.forward(params, xs, lengths=lengths),
        lambda: module.loss_and_grads(params, xs, ys, lengths=lengths),
        lambda: module.losses(module.forward(params, xs)[0], ys, lengths=lengths),
    ):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize("truncate", [None, ("chunk", 2)])
def test_compile_with_lengths_is_the_uncompiled_call(monkeypatch, truncate):
    """compile=True (its steps run uncompiled: torch.compile takes seconds) gives loss_and_grads' numbers."""
    module, model = module_of("lstm_torch"), load("lstm")
    monkeypatch.setattr(module, "_compiled", lambda step: step)
    params, xs, ys, _ = zoo_values(model, 2)
    arrays = {k: torch.as_tensor(v) for k, v in params.items()}, torch.as_tensor(xs), torch.as_tensor(ys)
    lengths = torch.as_tensor(lengths_drawn(np.random.default_rng(2), T, B))
    loss, grads = module.loss_and_grads(*arrays, truncate=truncate, lengths=lengths)
    other, compiled = module.loss_and_grads(*arrays, truncate=truncate, lengths=lengths, compile=True)
    assert abs(float(loss - other)) <= 1e-12
    for key, value in grads.items():
        assert torch.allclose(compiled[key], value, rtol=0, atol=1e-12), key


@pytest.mark.parametrize(
    "options",
    [{}, {"truncate": ("chunk", 2)}, {"checkpoints": 2}, {"compile": True}],
    ids=["full", "chunk", "ckpt", "compile"],
)
@pytest.mark.parametrize("name", ["lstm", "linear", "jordan"])
def test_model_with_lengths_gives_loss_and_grads_gradients(monkeypatch, name, options):
    """Model(...)(xs, lengths=) and Model.loss(..., lengths=), through loss.backward(), give loss_and_grads(lengths=)'s
    loss and gradients (proven above against each sequence alone), the initial states' too; compile=True with its
    steps uncompiled (torch.compile takes seconds)."""
    module, model = module_of(f"{name}_torch"), load(name)
    monkeypatch.setattr(module, "_compiled", lambda step: step, raising=False)
    params, xs, ys, initial = (torch.as_tensor(a) if not isinstance(a, dict) else a for a in zoo_values(model, 4))
    params = {k: torch.as_tensor(v) for k, v in params.items()}
    states = {f"{k}0": torch.as_tensor(v).requires_grad_() for k, v in initial.items()}
    lengths = torch.as_tensor(lengths_drawn(np.random.default_rng(4), T, B))
    net = module.Model(**_param_sizes(module._SPEC, params), **options)
    with torch.no_grad():
        for key, value in params.items():
            getattr(net, key).copy_(value)
    data = (xs, ys) if module.TEACHER_FORCED else (xs,)
    outputs = net(*data, **states, lengths=lengths)
    assert not outputs[torch.arange(T)[:, None] >= lengths].any(), "outputs at padded steps are not zero"
    loss = net.loss(outputs, ys, lengths=lengths)
    loss.backward()
    plain = {k: v for k, v in options.items() if k != "compile"}
    expected_loss, expected = module.loss_and_grads(params, xs, ys, **states, lengths=lengths, **plain)
    assert abs(float(loss.detach() - expected_loss)) <= 1e-12
    got = {**{k: getattr(net, k).grad for k in module.PARAMS}, **{k: v.grad for k, v in states.items()}}
    for key, value in expected.items():
        assert torch.allclose(got[key], value, rtol=1e-12, atol=1e-14), key
