"""PyTorch peers for `bptt bench`: the zoo's Elman RNNs on torch.nn.RNN, its GRU on torch.nn.GRU and
its LSTM on torch.nn.LSTM (gate order and biases as torch has them, which the zoo models follow),
with the same head and loss; its LayerNorm-LSTM (Ba et al.) as a loop over the steps with three torch.nn.LayerNorm
modules, the input's norm taken for all steps at once, by autograd. Present only where torch is installed;
one thread."""

import importlib.util

import numpy as np

from bptt.derive.models import layernorm

GATES = {"gru": "rzn", "lstm": "ifgo"}
EPS = float(layernorm.EPS)  # lstm-layernorm's, torch.nn.LayerNorm's default


def available():
    return importlib.util.find_spec("torch") is not None


def supports(model):
    return model.name in ("elman", "elman-onehot", "gru", "lstm", "lstm-layernorm")


def prepare(model, params, xs, ys, initial):
    """(run, collect): run() does one forward and backward pass; collect(run()) -> (loss, {key: gradient})."""
    import torch

    torch.set_num_threads(1)
    dtype = torch.float64 if next(iter(params.values())).dtype == np.float64 else torch.float32
    T, B = xs.shape[0], xs.shape[1]
    leaf = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    states = {k: torch.tensor(v[None], requires_grad=True) for k, v in initial.items()}
    x = torch.from_numpy(xs)
    y = torch.from_numpy(ys)
    if model.name == "lstm-layernorm":
        return _layernorm_lstm(torch, leaf, states, x, y, dtype, B)
    if model.name in GATES:
        return _gated(model.name, torch, leaf, states, x, y, dtype, B)
    return _elman(model.name == "elman-onehot", torch, leaf, states, x, y, dtype, T, B)


def _elman(onehot, torch, leaf, states, x, y, dtype, T, B):
    F = torch.nn.functional
    h = leaf["W"].shape[0]
    rnn = torch.nn.RNN(h if onehot else leaf["U"].shape[1], h, bias=not onehot).to(dtype)
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(leaf["W"])
        if onehot:
            rnn.weight_ih_l0.copy_(torch.eye(h, dtype=dtype))  # the lookup U[:, x_t] is the input
            rnn.weight_ih_l0.requires_grad_(False)
        else:
            rnn.weight_ih_l0.copy_(leaf["U"])
            rnn.bias_ih_l0.copy_(leaf["b"])
            rnn.bias_hh_l0.zero_()
            rnn.bias_hh_l0.requires_grad_(False)
    key = "s0" if onehot else "h0"
    h0 = states.get(key, torch.zeros(1, B, h, dtype=dtype, requires_grad=True))
    labels = y.reshape(-1)
    U, V = leaf["U"], leaf["V"]

    def run():
        for tensor in [*rnn.parameters(), U, V, leaf.get("c", V), h0]:
            tensor.grad = None
        inputs = F.embedding(x, U.t()) if onehot else x
        out, _ = rnn(inputs, h0)
        s = F.linear(out, V, None if onehot else leaf["c"])
        loss = F.cross_entropy(s.reshape(-1, s.shape[-1]), labels, reduction="sum") / B
        loss.backward()
        return loss

    def collect(loss):
        grads = {"W": rnn.weight_hh_l0.grad, "V": V.grad, key: h0.grad[0]}
        grads["U"] = U.grad if onehot else rnn.weight_ih_l0.grad
        if not onehot:
            grads.update(b=rnn.bias_ih_l0.grad, c=leaf["c"].grad)
        return float(loss.detach()), {k: v.detach().numpy() for k, v in grads.items()}

    return run, collect


def _gated(name, torch, leaf, states, x, y, dtype, B):
    F = torch.nn.functional
    gates = GATES[name]
    h, d = leaf["W_h" + gates[0]].shape[0], leaf["W_i" + gates[0]].shape[1]
    net = (torch.nn.GRU if name == "gru" else torch.nn.LSTM)(d, h).to(dtype)
    with torch.no_grad():
        for kind in "ih":
            getattr(net, f"weight_{kind}h_l0").copy_(torch.cat([leaf[f"W_{kind}{g}"] for g in gates]))
            getattr(net, f"bias_{kind}h_l0").copy_(torch.cat([leaf[f"b_{kind}{g}"] for g in gates]))
    zero = torch.zeros(1, B, h, dtype=dtype)
    h0 = states.get("h0", zero.clone().requires_grad_(True))
    c0 = states.get("c0", zero.clone().requires_grad_(True))
    V = leaf["V"]

    def run():
        for tensor in [*net.parameters(), V, h0, c0]:
            tensor.grad = None
        out, _ = net(x, h0) if name == "gru" else net(x, (h0, c0))
        loss = 0.5 * (F.linear(out, V) - y).square().sum() / B
        loss.backward()
        return loss

    def collect(loss):
        grads = {"V": V.grad, "h0": h0.grad[0]}
        if name == "lstm":
            grads["c0"] = c0.grad[0]
        for kind in "ih":
            for label, value in (("W", f"weight_{kind}h_l0"), ("b", f"bias_{kind}h_l0")):
                parts = getattr(net, value).grad.chunk(len(gates))
                grads.update({f"{label}_{kind}{g}": part for g, part in zip(gates, parts, strict=True)})
        return float(loss.detach()), {k: v.detach().numpy() for k, v in grads.items()}

    return run, collect


def _layernorm_lstm(torch, leaf, states, x, y, dtype, B):
    """Ba et al.'s equations 20-22 (gates f, i, o, g; the zoo's epsilon), each norm a torch.nn.LayerNorm whose gain
    and bias are alpha_k and beta_k."""
    p, h = leaf, leaf["W_h"].shape[1]
    norms = {}
    for k in (1, 2, 3):
        norms[k] = torch.nn.LayerNorm(p[f"alpha_{k}"].shape[0], eps=EPS, dtype=dtype)
        with torch.no_grad():
            norms[k].weight.copy_(p[f"alpha_{k}"])
            norms[k].bias.copy_(p[f"beta_{k}"])
    W_h, W_x, b, V = p["W_h"], p["W_x"], p["b"], p["V"]
    zero = torch.zeros(1, B, h, dtype=dtype)
    h0, c0 = (states.get(key, zero.clone().requires_grad_(True)) for key in ("h0", "c0"))
    leaves = [W_h, W_x, b, V, h0, c0, *(t for norm in norms.values() for t in norm.parameters())]

    def run():
        for tensor in leaves:
            tensor.grad = None
        inputs = norms[2](x @ W_x.T) + b
        hidden, cell, out = h0[0], c0[0], []
        for a in inputs:
            f, i, o, g = (norms[1](hidden @ W_h.T) + a).split(h, -1)
            cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
            hidden = torch.sigmoid(o) * torch.tanh(norms[3](cell))
            out.append(hidden)
        loss = 0.5 * (torch.stack(out) @ V.T - y).square().sum() / B
        loss.backward()
        return loss

    def collect(loss):
        grads = {"W_h": W_h.grad, "W_x": W_x.grad, "b": b.grad, "V": V.grad, "h0": h0.grad[0], "c0": c0.grad[0]}
        for k, norm in norms.items():
            grads.update({f"alpha_{k}": norm.weight.grad, f"beta_{k}": norm.bias.grad})
        return float(loss.detach()), {k: v.detach().numpy() for k, v in grads.items()}

    return run, collect
