"""The model language against torch's own bidirectional modules on packed variable-length batches: the two-layer
bidirectional LSTM and the bidirectional GRU of examples/torch_bidirectional.py (torch's layout: gate order i, f, g, o
and r, z, n, b_ih and b_hh, layer 2 reading [h1f; h1b] through blocks of columns of its W_ih), computed by the oracle
(tests/support/oracle.py, torch autograd over the model's equations, no torch.nn) one sequence alone at a time on its
own steps, the losses averaged over the batch as the generated modules average them, equal torch.nn.LSTM/GRU(
bidirectional=True) on a PackedSequence, weights copied, to 1e-12 in float64: the top layer's outputs at every valid
step, the head's, the final states h_n and c_n (forward at each sequence's last step, reverse at its first), the
loss, every parameter gradient and every initial-state gradient. And pytorch/pytorch#517's example: a bidirectional
GRU whose reverse direction must start at each sequence's own last step, not on the padding."""

import dataclasses
import functools
import pathlib

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from bptt.derive.model import sequence
from bptt.derive.models import load
from bptt.tests.support import oracle

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "torch_bidirectional.py"
D, Q = 3, 2
TOL = 1e-12
WAYS = (("f", ""), ("b", "_reverse"))  # our direction's mark, torch's parameter suffix


@dataclasses.dataclass
class Answer:
    """A batch's answer, NumPy arrays, zero at padded steps: loss, grads (our keys), the head's s (T, B, q), the top
    layer's output [h_f; h_b] (T, B, 2h), the final states {state name: (B, h)}."""

    loss: float
    grads: dict
    s: np.ndarray
    top: np.ndarray
    final: dict


@functools.cache
def model_of(kind):
    """The example's model, loaded once per process (a Model is frozen: every test may share it)."""
    return load(f"{EXAMPLE}:{kind}")


def exposed(model):
    """The model with each state also an output o_<state> (the oracle's Result then holds every state at every step)."""
    shown = tuple((sequence(f"o_{seq.name}", seq.rows, "output"), seq()) for seq in model.states)
    return dataclasses.replace(model, outputs=model.outputs + shown)


def draw(model, h, lengths, seed):
    """(params, xs, ys, initial) of a padded batch: random parameters in the maths' shapes, nan inputs and targets
    (labels far out of range) at the padded steps, that nothing may read; non-zero initial states."""
    rng = np.random.default_rng(seed)
    sizes = dict(zip(model.sizes, (D, h, Q), strict=True))
    params = {}
    for p in model.params:
        rows, cols = (int(n.subs(sizes)) for n in p.shape)
        params[p.name] = rng.normal(0, 0.5, (rows,) if cols == 1 else (rows, cols))
    T, B = max(lengths), len(lengths)
    pad = np.arange(T)[:, None] >= np.asarray(lengths)
    xs = rng.normal(size=(T, B, D))
    xs[pad] = np.nan
    if model.concrete_loss().target.role == "label":
        ys = rng.integers(0, Q, (T, B))
        ys[pad] = -(10**6)
    else:
        ys = rng.normal(size=(T, B, Q))
        ys[pad] = np.nan
    initial = {seq.name: rng.normal(0, 0.5, (B, h)) for seq in model.states}
    return params, xs, ys, initial


def layers_of(model):
    return max(int(p.name[-2]) for p in model.params if p.name.startswith("W_ih"))


def oracle_alone(model, params, xs, ys, initial, lengths):
    """The batch's Answer by the oracle: each sequence alone on its own steps (B = 1), its loss and gradients
    averaged over the batch, as the generated modules' loss_and_grads average them."""
    shown, (T, B), top = exposed(model), xs.shape[:2], layers_of(model)
    h = initial[model.states[0].name].shape[1]
    answer = Answer(0.0, {}, np.zeros((T, B, Q)), np.zeros((T, B, 2 * h)), {})
    for b, length in enumerate(lengths):
        one = (slice(None, length), slice(b, b + 1))
        result = oracle.run(shown, params, xs[one], ys[one], {key: value[b : b + 1] for key, value in initial.items()})
        answer.loss += result.loss / B
        for key, grad in result.grads.items():
            if key in params:
                answer.grads[key] = answer.grads.get(key, 0) + grad / B
            else:
                answer.grads.setdefault(key, np.zeros((B, h)))[b] = grad[0] / B
        answer.s[:length, b] = result.outputs["s"][:, 0]
        answer.top[:length, b] = np.concatenate([result.outputs[f"o_h{top}{way}"][:, 0] for way in "fb"], axis=-1)
        for seq in model.states:
            step = -1 if seq.name.endswith("f") else 0  # forward: its last step; reverse: its first
            answer.final.setdefault(seq.name, np.zeros((B, h)))[b] = result.outputs[f"o_{seq.name}"][step, 0]
    return answer


def torch_module(model, params, h):
    """torch.nn.LSTM or GRU(bidirectional=True) with our parameters copied, and {torch's name: ours}."""
    kind = torch.nn.LSTM if any(seq.name.startswith("c") for seq in model.states) else torch.nn.GRU
    layers = layers_of(model)
    rnn = kind(D, h, num_layers=layers, bidirectional=True, dtype=torch.float64)
    names = {}
    for layer in range(1, layers + 1):
        for way, suffix in WAYS:
            for ours, theirs in (
                ("W_ih", "weight_ih"),
                ("W_hh", "weight_hh"),
                ("b_ih", "bias_ih"),
                ("b_hh", "bias_hh"),
            ):
                names[f"{theirs}_l{layer - 1}{suffix}"] = f"{ours}{layer}{way}"
    with torch.no_grad():
        for theirs, ours in names.items():
            getattr(rnn, theirs).copy_(torch.tensor(params[ours]))
    return rnn, names


def torch_answer(model, params, xs, ys, initial, lengths, packed=True):
    """The batch's Answer by torch.nn.LSTM/GRU(bidirectional=True): on a PackedSequence of the lengths (unsorted,
    enforce_sorted=False), or (packed=False) on the padded batch as if every sequence had T steps, as
    pytorch/pytorch#517's code ran it; the same head and loss over each sequence's valid steps."""
    h = initial[model.states[0].name].shape[1]
    rnn, names = torch_module(model, params, h)
    layers, (T, B) = layers_of(model), xs.shape[:2]
    order = [f"{layer}{way}" for layer in range(1, layers + 1) for way, _ in WAYS]  # torch's h_0 rows
    starts = {
        kind: torch.tensor(np.stack([initial[f"{kind}{mark}"] for mark in order]), requires_grad=True)
        for kind in ("h", "c")
        if f"{kind}1f" in initial
    }
    head = {name: torch.tensor(params[name], requires_grad=True) for name in ("V", "c")}
    valid = torch.tensor(np.arange(T)[:, None] < np.asarray(lengths))
    data = torch.tensor(np.where(valid.numpy()[..., None], xs, 0.0))
    state = (starts["h"], starts["c"]) if "c" in starts else starts["h"]
    if packed:
        out, final = rnn(pack_padded_sequence(data, torch.tensor(lengths), enforce_sorted=False), state)
        out = pad_packed_sequence(out, total_length=T)[0]
    else:
        out, final = rnn(data, state)
    s = out @ head["V"].T + head["c"]
    if np.issubdtype(ys.dtype, np.integer):
        per_step = torch.nn.functional.cross_entropy(
            s.reshape(-1, Q), torch.tensor(np.where(valid.numpy(), ys, 0)).reshape(-1), reduction="none"
        ).reshape(T, B)
    else:
        per_step = 0.5 * ((s - torch.tensor(np.where(valid.numpy()[..., None], ys, 0.0))) ** 2).sum(-1)
    loss = torch.where(valid, per_step, 0).sum() / B
    loss.backward()
    grads = {ours: getattr(rnn, theirs).grad.numpy() for theirs, ours in names.items()}
    grads |= {name: leaf.grad.numpy() for name, leaf in head.items()}
    finals = final if isinstance(final, tuple) else (final,)
    ends = {}
    for kind, value in zip(("h", "c"), finals, strict=False):
        for row, mark in enumerate(order):
            grads[f"{kind}{mark}0"] = starts[kind].grad[row].numpy()
            ends[f"{kind}{mark}"] = value[row].detach().numpy()
    masked = valid.numpy()[..., None]
    s, out = (np.where(masked, value.detach().numpy(), 0) for value in (s, out))
    return Answer(float(loss.detach()), grads, s, out, ends)


def assert_agree(what, got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    error = np.abs(got - want).max() / max(1.0, np.abs(want).max())
    assert error <= TOL, f"{what}: differs by {error:.3e}"


def assert_same(ours, theirs):
    assert_agree("loss", ours.loss, theirs.loss)
    assert_agree("the top layer's outputs", ours.top, theirs.top)
    assert_agree("the head's outputs", ours.s, theirs.s)
    assert set(ours.final) == set(theirs.final)
    for name, value in theirs.final.items():
        assert_agree(f"final {name}", ours.final[name], value)
    assert set(ours.grads) == set(theirs.grads)
    for key, value in theirs.grads.items():
        assert_agree(f"gradient {key}", ours.grads[key], value)


CASES = {  # kind, h, lengths (T their largest)
    "lstm-5-3-1": ("lstm", 3, [5, 3, 1]),
    "lstm-3-to-50": ("lstm", 2, [17, 50, 3, 29]),
    "gru-5-3-1": ("gru", 3, [3, 5, 1]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_model_language_equals_torchs_bidirectional_module_on_a_packed_batch(case):
    kind, h, lengths = CASES[case]
    model = model_of(kind)
    values = draw(model, h, lengths, seed=len(case))
    assert_same(oracle_alone(model, *values, lengths), torch_answer(model, *values, lengths))


def test_pytorch_517_the_reverse_direction_starts_at_each_sequences_last_step():
    """pytorch/pytorch#517 (ozancaglayan's example): a bidirectional GRU with its reverse direction's weights tied to
    its forward one's, on a symmetric sequence [2, 4, 2] embedded with a zero vector for the padding token 0: run
    alone, the reverse state at step t is the forward state at step 4 - t. Padded to five steps, [2, 4, 2, 0, 0], in a
    batch with a sequence of five: the oracle's answer (each sequence alone) is torch's on the PackedSequence, and keeps
    the symmetry; torch's on the padded batch starts the reverse direction on the padding (its biases move the state
    there), and its outputs, final reverse state and gradients differ: the bug, which the oracle run on the padded
    batch's T steps reproduces."""
    model, h = model_of("gru"), 2
    rng = np.random.default_rng(234)
    embedding = rng.normal(size=(10, D))
    embedding[0] = 0  # padding_idx=0
    tokens = np.array([[2, 4, 2, 0, 0], [1, 3, 5, 7, 9]]).T
    lengths = [3, 5]
    params, _, ys, initial = draw(model, h, lengths, seed=517)
    for name in ("W_ih1", "W_hh1", "b_ih1", "b_hh1"):
        params[f"{name}b"] = params[f"{name}f"]
    initial = {name: np.zeros_like(value) for name, value in initial.items()}  # as the (no h_0 given)
    xs = embedding[tokens]
    ours = oracle_alone(model, params, xs, ys, initial, lengths)
    assert_same(ours, torch_answer(model, params, xs, ys, initial, lengths))
    forward, reverse = ours.top[:3, 0, :h], ours.top[:3, 0, h:]
    assert_agree("the symmetric sequence's reverse states, its forward ones reversed", reverse, forward[::-1])
    bug = torch_answer(model, params, xs, ys, initial, lengths, packed=False)
    assert_agree("the full-length sequence, padded", bug.top[:, 1], ours.top[:, 1])
    assert np.abs(bug.top[:3, 0, h:] - reverse).max() > 1e-3  # the short sequence's reverse states start on padding
    assert np.abs(bug.final["h1b"][0] - ours.final["h1b"][0]).max() > 1e-3
    assert np.abs(bug.top[:3, 0, h:] - forward[::-1]).max() > 1e-3  # and lose the symmetry
    assert max(np.abs(bug.grads[key] - ours.grads[key]).max() for key in ours.grads) > 1e-3
    padded = oracle.run(exposed(model), params, xs, np.where(ys < 0, 0, ys), initial)  # the oracle on all T steps
    assert_agree("the bug, as the oracle runs the padded batch", padded.outputs["o_h1b"][:3, 0], bug.top[:3, 0, h:])
