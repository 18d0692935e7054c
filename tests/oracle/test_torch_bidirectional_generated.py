"""Issue 27's "Done when": the generated modules of examples/torch_bidirectional.py's two-layer bidirectional LSTM and
bidirectional GRU tagger against torch.nn.LSTM/GRU(bidirectional=True), weights copied, in float64 to 1e-12: a padded
batch of sentences of lengths 3 to 50 (unsorted), fed to the generated torch Model as a PackedSequence and to the
NumPy and JAX modules with lengths=: the head's outputs at every valid step, each final state (forward at each
sequence's last step, reverse at its first), the loss and every parameter and initial-state gradient. Then a
bidirectional LSTM classifier (a softmax head on each sequence's last step, at="last") trained by SGD on
variable-length batches, the generated Model and torch.nn.LSTM in lockstep: equal parameters after every step."""

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the comparison needs torch (pip install 'bptt[torch]')")

from test_oracle_cells import generate
from test_torch_bidirectional import Q, assert_agree, draw, model_of, torch_answer, torch_module
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from bptt.examples import torch_bidirectional
from bptt.tests.support.padded import InNumPy

SENTENCES = [17, 50, 3, 29, 8]  # lengths 3 to 50, unsorted


@functools.cache
def generated(name, backend):
    """The module of examples/torch_bidirectional.py:<name> for the backend, generated once per process."""
    return generate(model_of(name), backend)


def torch_models_answer(module, params, xs, ys, states, lengths):
    """(loss, grads, outputs, final states) of the generated torch Model fed a PackedSequence, NumPy arrays."""
    T = xs.shape[0]
    net = module.Model(**module_sizes(params), dtype=torch.float64)
    with torch.no_grad():
        for name, value in params.items():
            getattr(net, name).copy_(torch.tensor(value))
    leaves = {key: torch.tensor(value, requires_grad=True) for key, value in states.items()}
    packed = pack_padded_sequence(torch.tensor(np.nan_to_num(xs)), torch.tensor(lengths), enforce_sorted=False)
    out = net(packed, **leaves)
    assert isinstance(out, torch.nn.utils.rnn.PackedSequence) and torch.equal(out.batch_sizes, packed.batch_sizes)
    outputs = pad_packed_sequence(out, total_length=T)[0]
    loss = net.loss(outputs, torch.tensor(ys), lengths=torch.tensor(lengths))
    loss.backward()
    grads = {name: getattr(net, name).grad.numpy() for name in module.PARAMS}
    grads |= {key: leaf.grad.numpy() for key, leaf in leaves.items()}
    _, cache = module.forward(
        {k: torch.tensor(v) for k, v in params.items()},
        torch.tensor(xs),
        **{k: torch.tensor(v) for k, v in states.items()},
        lengths=torch.tensor(lengths),
    )
    finals = {key.removesuffix("0"): cache[key.removesuffix("0")][-1].numpy() for key in states}
    return float(loss.detach()), grads, outputs.detach().numpy(), finals


def functions_answer(module, params, xs, ys, states, lengths):
    """(loss, grads, outputs, final states) of the module's forward and loss_and_grads with lengths=."""
    module = InNumPy(module)
    outputs, cache = module.forward(params, xs, ys, **states, lengths=np.asarray(lengths))
    loss, grads = module.loss_and_grads(params, xs, ys, **states, lengths=np.asarray(lengths))
    finals = {key.removesuffix("0"): cache[key.removesuffix("0")][-1] for key in states}
    return loss, grads, outputs, finals


def module_sizes(params):
    """{d, h, q} read off the parameters."""
    return {"d": params["W_ih1f"].shape[1], "h": params["W_hh1f"].shape[1], "q": params["V"].shape[0]}


CASES = [("lstm", "numpy"), ("lstm", "torch"), ("lstm", "jax"), ("gru", "numpy"), ("gru", "torch")]


@pytest.mark.parametrize(("name", "backend"), CASES)
def test_the_generated_module_equals_torchs_bidirectional_module_on_sentences_of_3_to_50_steps(name, backend):
    model, h = model_of(name), 2
    params, xs, ys, initial = draw(model, h, SENTENCES, seed=27)
    theirs = torch_answer(model, params, xs, ys, initial, SENTENCES)
    states = {f"{key}0": value for key, value in initial.items()}
    answer = torch_models_answer if backend == "torch" else functions_answer
    loss, grads, outputs, finals = answer(generated(name, backend), params, xs, ys, states, SENTENCES)
    assert_agree("loss", loss, theirs.loss)
    assert_agree("the head's outputs", outputs, theirs.s)
    assert set(finals) == set(theirs.final)
    for key, value in theirs.final.items():
        assert_agree(f"final {key}", finals[key], value)
    assert set(grads) == set(theirs.grads)
    for key, value in theirs.grads.items():
        assert_agree(f"gradient {key}", grads[key], value)


def classifier():
    """A one-layer bidirectional LSTM in torch's layout with a softmax head over both directions: a classifier."""
    return torch_bidirectional.bidirectional(
        "bilstm-classifier", "Classifier", torch_bidirectional._lstm_direction, 1, True
    )


def test_a_bidirectional_classifier_trains_in_lockstep_with_torchs_lstm():
    """SGD steps on batches of unsorted lengths, each batch its own, the loss at each sequence's last step
    (at="last"): the generated Model's parameters and torch.nn.LSTM's (with the same head) stay equal to 1e-12."""
    model, h, T, B = classifier(), 3, 9, 4
    batches = ([4, 9, 2, 6], [7, 1, 9, 3], [9, 5, 8, 2])
    params = draw(model, h, batches[0], seed=3)[0]
    module = generate(model, "torch")
    net = module.Model(**module_sizes(params), dtype=torch.float64)
    rnn, names = torch_module(model, params, h)
    head = {name: torch.nn.Parameter(torch.tensor(params[name])) for name in ("V", "c")}
    with torch.no_grad():
        for name, value in params.items():
            getattr(net, name).copy_(torch.tensor(value))
    ours, theirs = (torch.optim.SGD(parts, lr=0.5) for parts in (net.parameters(), [*rnn.parameters(), *head.values()]))
    rng = np.random.default_rng(11)
    for lengths in batches:
        last = torch.tensor(lengths) - 1
        xs = torch.tensor(rng.normal(size=(T, B, params["W_ih1f"].shape[1])))
        ys = torch.tensor(rng.integers(0, Q, (T, B)))
        packed = pack_padded_sequence(xs, torch.tensor(lengths), enforce_sorted=False)
        ours.zero_grad(), theirs.zero_grad()
        outputs = pad_packed_sequence(net(packed), total_length=T)[0]
        net.loss(outputs, ys, lengths=torch.tensor(lengths), at="last").backward()
        top = pad_packed_sequence(rnn(packed)[0], total_length=T)[0][last, torch.arange(B)]
        s = top @ head["V"].T + head["c"]
        (torch.nn.functional.cross_entropy(s, ys[last, torch.arange(B)], reduction="sum") / B).backward()
        ours.step(), theirs.step()
    moved = 0.0
    for theirs_name, ours_name in names.items():
        want = getattr(rnn, theirs_name).detach().numpy()
        assert_agree(f"{ours_name} after {len(batches)} steps", getattr(net, ours_name).detach().numpy(), want)
        moved = max(moved, np.abs(want - params[ours_name]).max())
    for name, value in head.items():
        assert_agree(f"{name} after {len(batches)} steps", getattr(net, name).detach().numpy(), value.detach().numpy())
    assert moved > 1e-3  # the steps trained something
