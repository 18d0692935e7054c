"""The oracle runs reverse-time states from the equations: the bidirectional Elman taggers of examples/birnn.py
equal torch.nn.RNN(bidirectional=True) (one and two layers, torch's tanh cell with its two biases, one of them
zero) with the same softmax head, to 1e-12 in float64: outputs, loss and every gradient, the initial states'
included. And a reverse-time direction alone equals the forward cell run on the reversed sequence, for the
tagger's and for every zoo cell's (several states, gates, one-hot inputs)."""

import numpy as np
import pytest
import torch

from bptt.derive.model import Model
from bptt.derive.models import load
from bptt.derive.nodes import t
from bptt.examples.birnn import birnn, two_layers
from bptt.tests.derive.test_reverse_mirror import CELLS, mirrored
from bptt.tests.support import oracle

T, B, D, H, Q = 5, 3, 2, 4, 3
TOL = 1e-12


def batch(model, seed):
    rng = np.random.default_rng(seed)
    sizes = {"d": D, "h": H, "q": Q}
    params = {}
    for p in model.params:
        rows, cols = (int(n.subs({s: sizes[s.name] for s in model.sizes})) for n in p.shape)
        params[p.name] = rng.normal(0, 0.5, (rows,) if cols == 1 else (rows, cols))
    initial = {f"{seq.name}0": rng.normal(0, 0.5, (B, H)) for seq in model.states}
    return params, rng.normal(size=(T, B, D)), rng.integers(0, Q, size=(T, B)), initial


def torch_rnn(params, xs, ys, initial, layers):
    """torch.nn.RNN's bidirectional Elman with the tagger's head; its loss, s and gradients in our names."""
    rnn = torch.nn.RNN(D, H, num_layers=layers, bidirectional=True, dtype=torch.float64)
    names = {}  # torch's parameter -> ours
    for layer in range(1, layers + 1):
        mark = str(layer) if layers > 1 else ""
        for way, suffix in (("f", ""), ("b", "_reverse")):
            inputs = ["", ""] if layer == 1 else ["f", "b"]
            weight_ih = [f"W{mark}_{way}{tag}" for tag in dict.fromkeys(inputs)]
            names[f"weight_ih_l{layer - 1}{suffix}"] = weight_ih
            names[f"weight_hh_l{layer - 1}{suffix}"] = [f"U{mark}_{way}"]
            names[f"bias_ih_l{layer - 1}{suffix}"] = [f"b{mark}_{way}"]
    with torch.no_grad():
        for name, ours in names.items():
            getattr(rnn, name).copy_(torch.tensor(np.concatenate([params[n] for n in ours], axis=-1)))
        for name, _ in rnn.named_parameters():
            if name.startswith("bias_hh"):
                getattr(rnn, name).zero_()
    keys = [f"h{mark}_{way}0" for mark in (["1", "2"] if layers > 1 else [""]) for way in "fb"]
    h0 = torch.tensor(np.stack([initial[key] for key in keys]), requires_grad=True)
    head = {name: torch.tensor(params[name], requires_grad=True) for name in ("V_f", "V_b", "c")}
    out, _ = rnn(torch.tensor(xs), h0)
    s = out[..., :H] @ head["V_f"].T + out[..., H:] @ head["V_b"].T + head["c"]
    loss = torch.nn.functional.cross_entropy(s.reshape(-1, Q), torch.tensor(ys).reshape(-1), reduction="sum") / B
    loss.backward()
    grads = {name: value.grad.numpy() for name, value in head.items()}
    for name, ours in names.items():
        grad = getattr(rnn, name).grad.numpy()
        for n, key in enumerate(ours):
            grads[key] = grad[:, n * H : (n + 1) * H] if len(ours) > 1 else grad
    grads |= {key: h0.grad[n].numpy() for n, key in enumerate(keys)}
    return float(loss.detach()), s.detach().numpy(), grads


def agree(got, expected):
    return np.abs(got - expected).max() <= TOL * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize(("cell", "layers"), [(birnn, 1), (two_layers, 2)])
def test_the_oracle_is_torchs_bidirectional_rnn(cell, layers):
    model = cell()
    params, xs, ys, initial = batch(model, seed=layers)
    result = oracle.run(model, params, xs, ys, initial)
    loss, s, grads = torch_rnn(params, xs, ys, initial, layers)
    assert abs(result.loss - loss) <= TOL * max(1.0, abs(loss))
    assert agree(result.outputs["s"], s)
    assert set(result.grads) == set(grads)
    bad = [key for key in grads if not agree(result.grads[key], grads[key])]
    assert not bad, bad
    assert oracle.loss(model, params, xs, ys, initial) == pytest.approx(loss, rel=TOL)


def test_a_reverse_direction_is_the_forward_cell_on_the_reversed_sequence():
    """h_b alone (its head only) on xs equals the same cell run forward (h_b read at t-1) on xs reversed in time:
    outputs reversed, the same loss and gradients (the initial state entering at T+1 as h_0 enters at 0)."""
    full = birnn()
    state, backward_rhs = full.steps[1]
    kept = [p for p in full.params if "_f" not in p.name]
    reverse_only = _with(full, "reverse", ((state, backward_rhs),), kept)
    flipped = backward_rhs.xreplace({state(t + 1): state(t - 1)})
    forward_only = _with(full, "forward", ((state, flipped),), kept)
    params, xs, ys, initial = batch(reverse_only, seed=3)
    ours = oracle.run(reverse_only, params, xs, ys, initial)
    theirs = oracle.run(forward_only, params, xs[::-1].copy(), ys[::-1].copy(), initial)
    assert ours.loss == pytest.approx(theirs.loss, rel=TOL)
    assert agree(ours.outputs["s"], theirs.outputs["s"][::-1])
    assert set(ours.grads) == set(theirs.grads) == {"W_b", "U_b", "b_b", "V_b", "c", "h_b0"}
    assert all(agree(ours.grads[key], theirs.grads[key]) for key in theirs.grads)


def _with(model, name, steps, params):
    """The tagger with only the given step and params, its head reading that state only."""
    (state, _), (output, _) = steps[0], model.outputs[0]
    V_b, c = (next(p for p in params if p.name == n) for n in ("V_b", "c"))
    return Model(
        name=name,
        title=name,
        source="tests",
        sizes=model.sizes,
        params=tuple(params),
        inputs=model.inputs,
        steps=steps,
        outputs=((output, V_b * state() + c),),
        loss=model.loss,
    )


@pytest.mark.parametrize("name", CELLS)
def test_the_oracle_runs_every_zoo_cell_in_reverse_time(name):
    """A zoo cell's mirror (its states read at t+1) on the reversed sequence: the cell's outputs reversed, its
    loss and its gradients, the oracle's forward path against its sweeps."""
    model = load(name)
    mirror = mirrored(model)
    rng = np.random.default_rng(4)
    sizes = dict(zip(model.sizes, (D, H, Q), strict=True))
    params = {}
    for p in model.params:
        rows, cols = (int(n.subs(sizes)) for n in p.shape)
        params[p.name] = rng.normal(0, 0.5, (rows,) if cols == 1 else (rows, cols))
    (x,) = model.inputs
    rows_of = {seq: int(seq.rows.subs(sizes)) for seq in (x, *model.states)}
    xs = rng.integers(0, rows_of[x], (T, B)) if x.role == "label" else rng.normal(size=(T, B, rows_of[x]))
    target = model.concrete_loss().target
    classes = int(target.rows.subs(sizes))
    ys = rng.integers(0, classes, (T, B)) if target.role == "label" else rng.normal(size=(T, B, classes))
    initial = {f"{seq.name}0": rng.normal(0, 0.5, (B, rows_of[seq])) for seq in model.states}
    expected = oracle.run(model, params, xs, ys, initial)
    got = oracle.run(mirror, params, xs[::-1].copy(), ys[::-1].copy(), initial)
    assert got.loss == pytest.approx(expected.loss, rel=TOL)
    for output in expected.outputs:
        assert agree(got.outputs[output], expected.outputs[output][::-1])
    assert set(got.grads) == set(expected.grads)
    bad = [key for key in expected.grads if not agree(got.grads[key], expected.grads[key])]
    assert not bad, bad
