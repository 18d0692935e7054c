"""Gated cells: torch.nn.LSTM, Greff et al.'s vanilla LSTM with peepholes, torch.nn.GRU.

Each gate's pre-activation is a named intermediate (`i_bar` prints as i with a
bar), so that by the rule for named adjoints the derivation keeps one named
adjoint per gate, as Greff et al.'s appendix and Graves' thesis write them.
A linear head s_t = V h_t with a squared error stands in for the layers above.
"""

from sympy import HadamardProduct

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh

TORCH = "PyTorch documentation, torch.nn.{}"
GREFF = (
    "Greff, Srivastava, Koutnik, Steunebrink and Schmidhuber, LSTM: A Search Space Odyssey "
    "(IEEE TNNLS, 2017), section II and appendix (vanilla LSTM with peepholes)"
)


def _head(h, q):
    """The output s_t = V h_t, its target y_t and the parameter V."""
    return matrix("V", q, h), sequence("s", q, "output"), sequence("y", q, "target")


def _torch_gate(gate, d, h, x, hidden):
    """torch's W_i{gate} x_t + b_i{gate} + W_h{gate} h_{t-1} + b_h{gate}, and its four parameters."""
    W_x, b_x = matrix(f"W_i{gate}", h, d), vector(f"b_i{gate}", h)
    W_h, b_h = matrix(f"W_h{gate}", h, h), vector(f"b_h{gate}", h)
    return (W_x, b_x, W_h, b_h), W_x * x() + b_x + W_h * hidden(t - 1) + b_h


def lstm():
    d, h, q = sizes("d h q")
    x, hidden, cell = sequence("x", d, "input"), sequence("h", h, "state"), sequence("c", h, "state")
    params, steps, gates = [], [], {}
    for gate, activation in (("i", sigmoid), ("f", sigmoid), ("g", tanh), ("o", sigmoid)):
        weights, pre_activation = _torch_gate(gate, d, h, x, hidden)
        bar, value = sequence(f"{gate}_bar", h, "intermediate"), sequence(gate, h, "intermediate")
        params += weights
        steps += [(bar, pre_activation), (value, activation(bar()))]
        gates[gate] = value
    i, f, g, o = (gates[name]() for name in "ifgo")
    V, s, y = _head(h, q)
    steps += [(cell, HadamardProduct(f, cell(t - 1)) + HadamardProduct(i, g))]
    steps += [(hidden, HadamardProduct(o, tanh(cell())))]
    return Model(
        name="lstm",
        title="LSTM as in torch.nn.LSTM",
        source=TORCH.format("LSTM") + "; Hochreiter and Schmidhuber (1997) with a forget gate (Gers et al., 2000)",
        sizes=(d, h, q),
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )


def lstm_peephole():
    d, h, q = sizes("d h q")
    x, hidden, cell = sequence("x", d, "input"), sequence("h", h, "state"), sequence("c", h, "state")
    names = {}
    for gate in "zifo":
        names[gate] = matrix(f"W_{gate}", h, d), matrix(f"R_{gate}", h, h), vector(f"b_{gate}", h)
    peepholes = {gate: vector(f"p_{gate}", h) for gate in "ifo"}
    seqs = {n: sequence(n, h, "intermediate") for n in ("z_bar", "z", "i_bar", "i", "f_bar", "f", "o_bar", "o")}

    def pre_activation(gate, peephole_cell=None):
        W, R, b = names[gate]
        total = W * x() + R * hidden(t - 1) + b
        return total if peephole_cell is None else total + HadamardProduct(peepholes[gate], peephole_cell)

    z, i, f, o = (seqs[n]() for n in "zifo")
    V, s, y = _head(h, q)
    steps = (
        (seqs["z_bar"], pre_activation("z")),
        (seqs["z"], tanh(seqs["z_bar"]())),
        (seqs["i_bar"], pre_activation("i", cell(t - 1))),
        (seqs["i"], sigmoid(seqs["i_bar"]())),
        (seqs["f_bar"], pre_activation("f", cell(t - 1))),
        (seqs["f"], sigmoid(seqs["f_bar"]())),
        (cell, HadamardProduct(z, i) + HadamardProduct(cell(t - 1), f)),
        (seqs["o_bar"], pre_activation("o", cell())),
        (seqs["o"], sigmoid(seqs["o_bar"]())),
        (hidden, HadamardProduct(tanh(cell()), o)),
    )
    params = [p for gate in "zifo" for p in names[gate]] + [peepholes[g] for g in "ifo"]
    return Model(
        name="lstm-peephole",
        title="Vanilla LSTM with peephole connections (Greff et al., 2017)",
        source=GREFF,
        sizes=(d, h, q),
        params=(*params, V),
        inputs=(x,),
        steps=steps,
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )


def gru():
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    params, steps, gates = [], [], {}
    for gate in "rz":
        weights, pre_activation = _torch_gate(gate, d, h, x, hidden)
        bar, value = sequence(f"{gate}_bar", h, "intermediate"), sequence(gate, h, "intermediate")
        params += weights
        steps += [(bar, pre_activation), (value, sigmoid(bar()))]
        gates[gate] = value()
    W_in, b_in, W_hn, b_hn = matrix("W_in", h, d), vector("b_in", h), matrix("W_hn", h, h), vector("b_hn", h)
    m, n_bar, n = (sequence(name, h, "intermediate") for name in ("m", "n_bar", "n"))
    r, z = gates["r"], gates["z"]
    V, s, y = _head(h, q)
    steps += [
        (m, W_hn * hidden(t - 1) + b_hn),  # torch applies r to W_hn h_{t-1} + b_hn
        (n_bar, W_in * x() + b_in + HadamardProduct(r, m())),
        (n, tanh(n_bar())),
        (hidden, HadamardProduct(1 - z, n()) + HadamardProduct(z, hidden(t - 1))),
    ]
    return Model(
        name="gru",
        title="GRU as in torch.nn.GRU",
        source=TORCH.format("GRU") + "; Cho et al. (2014), with the reset gate applied after the recurrent product",
        sizes=(d, h, q),
        params=(*params, W_in, b_in, W_hn, b_hn, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )
