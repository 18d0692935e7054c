"""torch.nn.LSTM(bidirectional=True, num_layers=2) and torch.nn.GRU(bidirectional=True) in the model language, in
torch's layout: each direction's W_ih, W_hh, b_ih and b_hh, the gates stacked by rows in torch's order (i, f, g, o
for the LSTM, r, z, n for the GRU); the forward direction's states read at t-1, the reverse direction's at t+1
(computed from the last step back to the first, from their initial values); layer 2's W_ih (4h x 2h) reads
[h1f_t; h1b_t] through its blocks of h columns. A head reads both directions of the top layer through blocks of
columns of V (q x 2h): s_t = V[:, 0:h] h_f,t + V[:, h:2*h] h_b,t + c; a squared error (the LSTM) or softmax
cross-entropy against labels (the GRU).

Try:  bptt latex examples/torch_bidirectional.py:lstm --format md
      bptt latex examples/torch_bidirectional.py:gru
"""

from sympy import HadamardProduct, OneMatrix

from bptt.derive.model import Model, labels, matrix, sequence, sizes, vector
from bptt.derive.nodes import SoftmaxCrossEntropy, SquaredError, sigmoid, t, tanh

DIRECTIONS = (("f", t - 1), ("b", t + 1))  # torch's forward direction reads step t-1, its reverse one t+1
LSTM_GATES = (("i", sigmoid), ("f", sigmoid), ("g", tanh), ("o", sigmoid))


def _weights(name, gates, h, reads):
    """torch's W_ih, W_hh, b_ih, b_hh of direction `name` (e.g. 2f), for `gates` stacked gates reading `reads`."""
    rows = sum(seq.rows for seq in reads)
    return (
        matrix(f"W_ih{name}", gates * h, rows),
        matrix(f"W_hh{name}", gates * h, h),
        *(vector(f"b_{side}{name}", gates * h) for side in ("ih", "hh")),
    )


def _input_part(W_ih, b_ih, rows, reads):
    """b_ih[rows] + W_ih[rows, :] [reads at t], each sequence read through its block of columns."""
    total, start = b_ih[rows, :], 0
    for seq in reads:
        total += W_ih[rows, start : start + seq.rows] * seq()
        start += seq.rows
    return total


def _lstm_direction(name, before, reads, h):
    """One direction of an LSTM layer: its parameters, its steps, its hidden state."""
    hidden, cell = sequence(f"h{name}", h, "state"), sequence(f"c{name}", h, "state")
    W_ih, W_hh, b_ih, b_hh = weights = _weights(name, 4, h, reads)
    steps, gates = [], {}
    for k, (gate, activation) in enumerate(LSTM_GATES):
        rows = slice(k * h, (k + 1) * h)
        bar, value = sequence(f"{gate}{name}_bar", h, "intermediate"), sequence(f"{gate}{name}", h, "intermediate")
        below = _input_part(W_ih, b_ih, rows, reads)
        steps += [(bar, below + W_hh[rows, :] * hidden(before) + b_hh[rows, :]), (value, activation(bar()))]
        gates[gate] = value()
    steps.append((cell, HadamardProduct(gates["f"], cell(before)) + HadamardProduct(gates["i"], gates["g"])))
    steps.append((hidden, HadamardProduct(gates["o"], tanh(cell()))))
    return weights, steps, hidden


def _gru_direction(name, before, reads, h):
    """One direction of a GRU layer, torch's: n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn)),
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}."""
    hidden = sequence(f"h{name}", h, "state")
    W_ih, W_hh, b_ih, b_hh = weights = _weights(name, 3, h, reads)
    r, z, n = (sequence(f"{gate}{name}", h, "intermediate") for gate in "rzn")
    rows = [slice(k * h, (k + 1) * h) for k in range(3)]
    recurrent = [W_hh[part, :] * hidden(before) + b_hh[part, :] for part in rows]
    steps = [
        (r, sigmoid(_input_part(W_ih, b_ih, rows[0], reads) + recurrent[0])),
        (z, sigmoid(_input_part(W_ih, b_ih, rows[1], reads) + recurrent[1])),
        (n, tanh(_input_part(W_ih, b_ih, rows[2], reads) + HadamardProduct(r(), recurrent[2]))),
        (hidden, HadamardProduct(OneMatrix(h, 1) - z(), n()) + HadamardProduct(z(), hidden(before))),
    ]
    return weights, steps, hidden


def bidirectional(name, title, direction, layers, tagger):
    """`layers` bidirectional layers of cells made by `direction`, layer l reading [h(l-1)f_t; h(l-1)b_t], and the
    head over the top layer's two directions: softmax cross-entropy against labels (tagger), else a squared error."""
    d, h, q = sizes("d h q")
    x = sequence("x", d, "input")
    params, steps, below = [], [], [x]
    for layer in range(1, layers + 1):
        hiddens = []
        for way, before in DIRECTIONS:
            weights, way_steps, hidden = direction(f"{layer}{way}", before, below, h)
            params += weights
            steps += way_steps
            hiddens.append(hidden)
        below = hiddens
    V, c, s = matrix("V", q, 2 * h), vector("c", q), sequence("s", q, "output")
    target = labels("y", q) if tagger else sequence("y", q, "target")
    return Model(
        name=name,
        title=title,
        source="PyTorch documentation, torch.nn.LSTM and torch.nn.GRU with bidirectional=True",
        sizes=(d, h, q),
        params=(*params, V, c),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V[:, 0:h] * below[0]() + V[:, h : 2 * h] * below[1]() + c),),
        loss=SoftmaxCrossEntropy(s(), target()) if tagger else SquaredError(s(), target()),
    )


def lstm():
    """torch.nn.LSTM(bidirectional=True, num_layers=2) with a linear head and a squared error."""
    return bidirectional("torch-bilstm", "Two-layer bidirectional LSTM in torch's layout", _lstm_direction, 2, False)


def gru():
    """torch.nn.GRU(bidirectional=True) with a softmax head: a tagger."""
    return bidirectional("torch-bigru", "Bidirectional GRU tagger in torch's layout", _gru_direction, 1, True)
