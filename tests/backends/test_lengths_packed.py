"""torch's Model.forward on a torch.nn.utils.rnn.PackedSequence, as nn.LSTM takes it: its outputs come back packed
the same way (batch_sizes, sorted and unsorted indices), and equal the padded call with lengths=, outputs and
every gradient (parameters and initial states) to 1e-12 in float64, sorted (enforce_sorted=True) or not."""

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import numpy as np
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from bptt.derive.models import load
from bptt.runtime.common import _param_sizes
from bptt.tests.backends.test_lengths_numpy import zoo_values
from bptt.tests.support.modules import module_of

T, B = 6, 4
TOL = 1e-12


def lstm_model(name, seed):
    """(module, Model with the zoo values' parameters, xs, ys, initial states requiring grad)."""
    module, model = module_of(f"{name.replace('-', '_')}_torch"), load(name)
    params, xs, ys, initial = zoo_values(model, seed)
    net = module.Model(**_param_sizes(module._SPEC, params))
    with torch.no_grad():
        for key, value in params.items():
            getattr(net, key).copy_(torch.as_tensor(value))
    states = {f"{key}0": torch.as_tensor(value) for key, value in initial.items()}
    return module, net, torch.as_tensor(xs), torch.as_tensor(ys), states


def gradients(module, net, run, states, weights):
    """(outputs, the gradients of sum(weights * outputs), parameters' and initial states') of run(states)."""
    net.zero_grad()
    leaves = {key: value.clone().requires_grad_() for key, value in states.items()}
    outputs = run(leaves)
    padded = pad_packed_sequence(outputs, total_length=T)[0] if isinstance(outputs, PackedSequence) else outputs
    (padded * weights).sum().backward()
    grads = {key: getattr(net, key).grad.clone() for key in module.PARAMS}
    return padded.detach(), grads | {key: leaf.grad for key, leaf in leaves.items()}


@pytest.mark.parametrize(
    ("enforce_sorted", "lengths"),
    [(True, [6, 4, 4, 1]), (False, [6, 4, 4, 1]), (False, [3, 6, 1, 5])],
    ids=["enforce-sorted", "sorted", "unsorted"],
)
@pytest.mark.parametrize("name", ["lstm", "lstm-peephole"])
def test_packed_sequence_is_the_padded_call_with_lengths(name, enforce_sorted, lengths):
    module, net, xs, _, states = lstm_model(name, seed=len(lengths) + enforce_sorted)
    lengths = torch.as_tensor(lengths)
    packed = pack_padded_sequence(xs, lengths, enforce_sorted=enforce_sorted)
    weights = torch.as_tensor(np.random.default_rng(2).standard_normal((T, B, net.V.shape[0])))
    out = net(packed, **states)
    assert isinstance(out, PackedSequence)
    assert torch.equal(out.batch_sizes, packed.batch_sizes)
    for order in ("sorted_indices", "unsorted_indices"):
        ours, theirs = getattr(out, order), getattr(packed, order)
        assert (ours is None and theirs is None) or torch.equal(ours, theirs), order
    got, got_grads = gradients(module, net, lambda leaves: net(packed, **leaves), states, weights)
    want, want_grads = gradients(module, net, lambda leaves: net(xs, **leaves, lengths=lengths), states, weights)
    assert torch.equal(pack_padded_sequence(want, lengths, enforce_sorted=False).data, out.data.detach())
    assert (got - want).abs().max() <= TOL
    for key, value in want_grads.items():
        error = (got_grads[key] - value).abs().max() / value.abs().max().clamp_min(1e-300)
        assert error <= TOL, f"gradient {key} differs by {error:.3e}"


def test_lengths_with_a_packed_sequence_is_refused_in_one_line():
    _, net, xs, _, _ = lstm_model("lstm", 0)
    packed = pack_padded_sequence(xs, torch.as_tensor([6, 4, 4, 1]))
    with pytest.raises(ValueError, match="^lengths= with a PackedSequence xs: it carries its own lengths") as error:
        net(packed, lengths=torch.as_tensor([6, 4, 4, 1]))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("at", [None, "last"])
def test_the_loss_of_packed_outputs_is_that_of_the_padded_call(at):
    """Model.loss takes the packed outputs forward returned (their lengths), and equals the loss of the padded call
    with lengths=, its value and every gradient, unsorted lengths included."""
    module, net, xs, ys, states = lstm_model("lstm", 5)
    lengths = torch.as_tensor([3, 6, 1, 5])
    found = {}
    for packed in (True, False):
        net.zero_grad()
        if packed:
            loss = net.loss(net(pack_padded_sequence(xs, lengths, enforce_sorted=False), **states), ys, at=at)
        else:
            loss = net.loss(net(xs, **states, lengths=lengths), ys, lengths=lengths, at=at)
        loss.backward()
        found[packed] = loss.detach(), {key: getattr(net, key).grad.clone() for key in module.PARAMS}
    (loss, grads), (want, want_grads) = found[True], found[False]
    assert abs(loss - want) <= TOL * abs(want)
    for key, value in want_grads.items():
        assert (grads[key] - value).abs().max() <= TOL * value.abs().max(), key
    with pytest.raises(ValueError, match="^lengths= with packed outputs: they carry their own lengths"):
        net.loss(net(pack_padded_sequence(xs, lengths, enforce_sorted=False), **states), ys, lengths=lengths)
