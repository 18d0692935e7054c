"""Normalised cells as their sources write them, each proved against a torch module of its own in
tests/oracle/test_norm_cells.py (tests/support/norm_references.py), beside the zoo's `lstm-layernorm` (Ba et al.):

- elman_layernorm: an Elman cell with torch.nn.LayerNorm (eps = 1e-5, its default) on the pre-activation,
      a_t = W h_{t-1} + U x_t + b,   h_t = tanh(LN(a_t; γ, β));
- lstm_layernorm_benchmark: PyTorch's benchmarks/fastrnns/custom_lstms.py LayerNormLSTMCell. Unlike Ba et al.'s,
  the projections have no bias (the norms' β stand in), the gates are i, f, g, o, and the cell's norm is the
  state itself (the next step reads the normalised c_t), where Ba et al. normalise c_t only on its way to h_t:
      (i, f, g, o) = LN(W_ih x_t; γ_i, β_i) + LN(W_hh h_{t-1}; γ_h, β_h)
      c_t = LN(σ(f) ⊙ c_{t-1} + σ(i) ⊙ tanh(g); γ_c, β_c),   h_t = σ(o) ⊙ tanh(c_t);
- gru_rmsnorm: torch.nn.GRUCell's equations with torch.nn.RMSNorm (eps = 1e-6) of the 3h input and hidden
  projections, split as r, z, n:
      a_t = RMS(W_ih x_t + b_ih; g_i),   m_t = RMS(W_hh h_{t-1} + b_hh; g_h)
      r = σ(a_r + m_r),  z = σ(a_z + m_z),  n = tanh(a_n + r ⊙ m_n),  h_t = (1 − z) ⊙ n + z ⊙ h_{t-1}.

Each has the head s_t = V h_t and the loss sum_t 1/2 ||s_t - y_t||^2.

Try:  bptt latex examples/layer_norm_cells.py:lstm_layernorm_benchmark
      bptt check examples/layer_norm_cells.py:gru_rmsnorm --backend all
"""

from sympy import HadamardProduct as odot
from sympy import Rational

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, layer_norm, rms_norm, sigmoid, t, tanh

TORCH_EPS, RMS_EPS = Rational(1, 10**5), Rational(1, 10**6)


def _cell(name, title, source, params, x, hidden, steps):
    """A cell with the linear head s_t = V h_t and a squared error."""
    d, h, q = x.rows, hidden.rows, sizes("q")
    V, s, y = matrix("V", q, h), sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name=name,
        title=title,
        source=source,
        sizes=(d, h, q),
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )


def _slices(name, whole, h, gates):
    """The gates named in `gates`, each a block of h rows of the intermediate `whole`, in order."""
    return [(sequence(f"{name}_{g}" if name else g, h, "intermediate"), whole()[k * h : (k + 1) * h, :])
            for k, g in enumerate(gates)]  # fmt: skip


def elman_layernorm():
    d, h = sizes("d h")
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
    W, U, b, gamma, beta = matrix("W", h, h), matrix("U", h, d), vector("b", h), vector("gamma", h), vector("beta", h)
    steps = ((a, W * hidden(t - 1) + U * x() + b), (hidden, tanh(layer_norm(a(), gamma, beta, TORCH_EPS))))
    return _cell(
        "elman-layernorm", "Elman RNN with torch.nn.LayerNorm on its pre-activation",
        "PyTorch documentation, torch.nn.RNNCell and torch.nn.LayerNorm", (W, U, b, gamma, beta), x, hidden, steps,
    )  # fmt: skip


def lstm_layernorm_benchmark():
    d, h = sizes("d h")
    x, hidden, cell = sequence("x", d, "input"), sequence("h", h, "state"), sequence("c", h, "state")
    W_ih, W_hh = matrix("W_ih", 4 * h, d), matrix("W_hh", 4 * h, h)
    norms = {
        part: (vector(f"gamma_{part}", n), vector(f"beta_{part}", n))
        for part, n in zip("ihc", (4 * h, 4 * h, h), strict=True)
    }
    gates = sequence("a", 4 * h, "intermediate")
    sliced = _slices("", gates, h, "ifgo")
    i, f, g, o = (seq() for seq, _ in sliced)
    steps = (
        (
            gates,
            layer_norm(W_ih * x(), *norms["i"], TORCH_EPS) + layer_norm(W_hh * hidden(t - 1), *norms["h"], TORCH_EPS),
        ),
        *sliced,
        (cell, layer_norm(odot(sigmoid(f), cell(t - 1)) + odot(sigmoid(i), tanh(g)), *norms["c"], TORCH_EPS)),
        (hidden, odot(sigmoid(o), tanh(cell()))),
    )
    params = (W_ih, W_hh, *(p for part in "ihc" for p in norms[part]))
    return _cell(
        "lstm-layernorm-benchmark", "PyTorch's benchmark LayerNormLSTMCell",
        "PyTorch, benchmarks/fastrnns/custom_lstms.py, LayerNormLSTMCell", params, x, hidden, steps,
    )  # fmt: skip


def gru_rmsnorm():
    d, h = sizes("d h")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    W_ih, b_ih, W_hh, b_hh = (
        matrix("W_ih", 3 * h, d),
        vector("b_ih", 3 * h),
        matrix("W_hh", 3 * h, h),
        vector("b_hh", 3 * h),
    )
    g_i, g_h = vector("g_i", 3 * h), vector("g_h", 3 * h)
    a, m = sequence("a", 3 * h, "intermediate"), sequence("m", 3 * h, "intermediate")
    (a_r, a_z, a_n), (m_r, m_z, m_n) = ([seq() for seq, _ in _slices(n.name, n, h, "rzn")] for n in (a, m))
    r, z, n = (sequence(gate, h, "intermediate") for gate in "rzn")
    steps = (
        (a, rms_norm(W_ih * x() + b_ih, g_i, RMS_EPS)),
        (m, rms_norm(W_hh * hidden(t - 1) + b_hh, g_h, RMS_EPS)),
        *_slices("a", a, h, "rzn"),
        *_slices("m", m, h, "rzn"),
        (r, sigmoid(a_r + m_r)),
        (z, sigmoid(a_z + m_z)),
        (n, tanh(a_n + odot(r(), m_n))),
        (hidden, odot(1 - z(), n()) + odot(z(), hidden(t - 1))),
    )
    return _cell(
        "gru-rmsnorm", "GRU with torch.nn.RMSNorm of its projections",
        "PyTorch documentation, torch.nn.GRUCell and torch.nn.RMSNorm", (W_ih, b_ih, W_hh, b_hh, g_i, g_h), x,
        hidden, steps,
    )  # fmt: skip
