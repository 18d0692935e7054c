"""Normalised recurrent cells in plain torch, written from their sources and sharing nothing with bptt's
derivation or code: the references that tests/oracle/test_norm_cells.py holds the model language's cells to.

- ElmanLayerNorm: an Elman cell with torch.nn.LayerNorm on its pre-activation;
- BaLayerNormLSTM: Ba, Kiros and Hinton (2016), Layer Normalization, equations 20-22: separate norms of
  W_h h_{t-1} and W_x x_t (4h each, gates in the paper's order f, i, o, g), and the norm of c_t inside
  h_t = o ⊙ tanh(LN(c_t)); LN(z; α, β) = (z − μ)/σ ⊙ α + β with the paper's σ, plus torch's epsilon under its root
  (the paper writes none; the zoo's lstm-layernorm takes 10⁻⁵);
- BenchmarkLayerNormLSTM: PyTorch's benchmarks/fastrnns/custom_lstms.py LayerNormLSTMCell, from its description:
  torch.nn.LayerNorm of the 4h input and hidden projections (no biases), gates i, f, g, o, and a torch.nn.LayerNorm
  of the cell, whose normalised value is the state carried to the next step;
- RMSNormGRU: torch.nn.GRUCell's equations with torch.nn.RMSNorm of its 3h input and hidden projections.

Each holds the head s_t = V h_t; run() copies a dict of NumPy weights in (keyed by the model language's names),
runs T steps and returns the outputs, the batch-mean loss sum_t 1/2 ||s_t − y_t||² / B and every gradient, by
torch's autograd.
"""

import numpy as np
import torch
from torch import nn

BENCHMARK_EPS = 1e-5  # torch.nn.LayerNorm's default, which the benchmark cell keeps
RMS_EPS = 1e-6


class PaperLayerNorm(nn.Module):
    """Ba et al.'s LN(z; α, β) = α ⊙ (z − μ)/σ + β, μ and σ the mean and (biased) deviation over the units, ε
    added to the variance under the root (0: the paper's)."""

    def __init__(self, n, eps=BENCHMARK_EPS):
        super().__init__()
        self.alpha, self.beta = nn.Parameter(torch.ones(n)), nn.Parameter(torch.zeros(n))
        self.eps = eps

    def forward(self, z):
        mu = z.mean(-1, keepdim=True)
        sigma = (((z - mu) ** 2).mean(-1, keepdim=True) + self.eps).sqrt()
        return self.alpha * (z - mu) / sigma + self.beta


class ElmanLayerNorm(nn.Module):
    """h_t = tanh(LayerNorm(W h_{t-1} + U x_t + b))."""

    STATES = ("h",)
    NAMES = {"W": "W.weight", "U": "U.weight", "b": "U.bias", "gamma": "norm.weight", "beta": "norm.bias"}

    def __init__(self, d, h):
        super().__init__()
        self.W, self.U = nn.Linear(h, h, bias=False), nn.Linear(d, h)
        self.norm = nn.LayerNorm(h, eps=BENCHMARK_EPS)

    def forward(self, x, state):
        (hidden,) = state
        return (torch.tanh(self.norm(self.W(hidden) + self.U(x))),)


class BaLayerNormLSTM(nn.Module):
    """(f, i, o, g) = LN(W_h h_{t-1}; α1, β1) + LN(W_x x_t; α2, β2) + b            (20)
    c_t = σ(f) ⊙ c_{t-1} + σ(i) ⊙ tanh(g)                                         (21)
    h_t = σ(o) ⊙ tanh(LN(c_t; α3, β3))                                            (22)"""

    STATES = ("h", "c")
    NAMES = {"W_h": "W_h", "W_x": "W_x", "b": "b"} | {
        f"{kind}_{k}": f"norm{k}.{kind}" for kind in ("alpha", "beta") for k in (1, 2, 3)
    }

    def __init__(self, d, h):
        super().__init__()
        self.W_h, self.W_x = nn.Parameter(torch.zeros(4 * h, h)), nn.Parameter(torch.zeros(4 * h, d))
        self.b = nn.Parameter(torch.zeros(4 * h))
        self.norm1, self.norm2, self.norm3 = PaperLayerNorm(4 * h), PaperLayerNorm(4 * h), PaperLayerNorm(h)

    def forward(self, x, state):
        hidden, cell = state
        f, i, o, g = (self.norm1(hidden @ self.W_h.T) + self.norm2(x @ self.W_x.T) + self.b).chunk(4, -1)
        cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(self.norm3(cell)), cell


class BenchmarkLayerNormLSTM(nn.Module):
    """PyTorch's fastrnns LayerNormLSTMCell: gates = LN_i(W_ih x_t) + LN_h(W_hh h_{t-1}) split as i, f, g, o;
    c_t = LN_c(σ(f) ⊙ c_{t-1} + σ(i) ⊙ tanh(g)) (the normalised cell is the state); h_t = σ(o) ⊙ tanh(c_t)."""

    STATES = ("h", "c")
    NAMES = {"W_ih": "W_ih.weight", "W_hh": "W_hh.weight"} | {
        f"{kind}_{part}": f"norm_{part}.{attribute}"
        for kind, attribute in (("gamma", "weight"), ("beta", "bias"))
        for part in "ihc"
    }

    def __init__(self, d, h):
        super().__init__()
        self.W_ih, self.W_hh = nn.Linear(d, 4 * h, bias=False), nn.Linear(h, 4 * h, bias=False)
        self.norm_i, self.norm_h = nn.LayerNorm(4 * h, eps=BENCHMARK_EPS), nn.LayerNorm(4 * h, eps=BENCHMARK_EPS)
        self.norm_c = nn.LayerNorm(h, eps=BENCHMARK_EPS)

    def forward(self, x, state):
        hidden, cell = state
        i, f, g, o = (self.norm_i(self.W_ih(x)) + self.norm_h(self.W_hh(hidden))).chunk(4, -1)
        cell = self.norm_c(torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g))
        return torch.sigmoid(o) * torch.tanh(cell), cell


class RMSNormGRU(nn.Module):
    """torch.nn.GRUCell with RMS norms: a = RMS_i(W_ih x_t + b_ih), m = RMS_h(W_hh h_{t-1} + b_hh), 3h each,
    split as r, z, n: r = σ(a_r + m_r), z = σ(a_z + m_z), n = tanh(a_n + r ⊙ m_n), h_t = (1 − z) ⊙ n + z ⊙ h_{t-1}."""

    STATES = ("h",)
    NAMES = {"W_ih": "W_ih.weight", "b_ih": "W_ih.bias", "W_hh": "W_hh.weight", "b_hh": "W_hh.bias"} | {
        "g_i": "norm_i.weight",
        "g_h": "norm_h.weight",
    }

    def __init__(self, d, h):
        super().__init__()
        self.W_ih, self.W_hh = nn.Linear(d, 3 * h), nn.Linear(h, 3 * h)
        self.norm_i, self.norm_h = nn.RMSNorm(3 * h, eps=RMS_EPS), nn.RMSNorm(3 * h, eps=RMS_EPS)

    def forward(self, x, state):
        (hidden,) = state
        a_r, a_z, a_n = self.norm_i(self.W_ih(x)).chunk(3, -1)
        m_r, m_z, m_n = self.norm_h(self.W_hh(hidden)).chunk(3, -1)
        r, z = torch.sigmoid(a_r + m_r), torch.sigmoid(a_z + m_z)
        return ((1 - z) * torch.tanh(a_n + r * m_n) + z * hidden,)


REFERENCES = {cls.__name__: cls for cls in (ElmanLayerNorm, BaLayerNormLSTM, BenchmarkLayerNormLSTM, RMSNormGRU)}


def _parameter(module, path):
    for part in path.split("."):
        module = getattr(module, part)
    return module


def run(cls, params, xs, ys, initial):
    """(outputs (T, B, q), loss, grads) of the reference cell with these NumPy weights and initial states (keys
    `h0`, `c0`), by torch autograd in float64; grads keyed by the model language's names, as the modules key them."""
    d, h = xs.shape[-1], initial["h0"].shape[-1]
    cell = cls(d, h).double()
    with torch.no_grad():
        for ours, path in cls.NAMES.items():
            _parameter(cell, path).copy_(torch.from_numpy(params[ours]).reshape(_parameter(cell, path).shape))
    V = torch.tensor(params["V"], requires_grad=True)
    starts = [torch.tensor(initial[f"{name}0"], requires_grad=True) for name in cls.STATES]
    state, outputs = tuple(starts), []
    for x in torch.from_numpy(xs):
        state = cell(x, state)
        outputs.append(state[0] @ V.T)
    outputs = torch.stack(outputs)
    loss = 0.5 * ((outputs - torch.from_numpy(ys)) ** 2).sum() / xs.shape[1]
    loss.backward()
    grads = {ours: _parameter(cell, path).grad.reshape(params[ours].shape) for ours, path in cls.NAMES.items()}
    grads |= {f"{name}0": start.grad for name, start in zip(cls.STATES, starts, strict=True)}
    grads = {key: np.asarray(value.detach()) for key, value in (grads | {"V": V.grad}).items()}
    return np.asarray(outputs.detach()), float(loss.detach()), grads
