"""torch.nn.LSTM as torch stores it: the four gates' weights stacked in one matrix each,
W_ih (4h x d), W_hh (4h x h), b_ih and b_hh (4h), in the order i, f, g, o. Each gate
reads its block of rows, e.g. W_ih[h:2h, :] for the forget gate.

Try:  bptt latex examples/torch_lstm.py:lstm --format md
      bptt check examples/torch_lstm.py:lstm
"""

from sympy import HadamardProduct

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh


def lstm():
    d, h, q = sizes("d h q")
    x, hidden, cell = sequence("x", d, "input"), sequence("h", h, "state"), sequence("c", h, "state")
    W_ih, W_hh = matrix("W_ih", 4 * h, d), matrix("W_hh", 4 * h, h)
    b_ih, b_hh = vector("b_ih", 4 * h), vector("b_hh", 4 * h)
    steps, gates = [], {}
    for k, (gate, activation) in enumerate((("i", sigmoid), ("f", sigmoid), ("g", tanh), ("o", sigmoid))):
        rows = slice(k * h, (k + 1) * h)
        bar, value = sequence(f"{gate}_bar", h, "intermediate"), sequence(gate, h, "intermediate")
        pre_activation = W_ih[rows, :] * x() + b_ih[rows, :] + W_hh[rows, :] * hidden(t - 1) + b_hh[rows, :]
        steps += [(bar, pre_activation), (value, activation(bar()))]
        gates[gate] = value()
    V, s, y = matrix("V", q, h), sequence("s", q, "output"), sequence("y", q, "target")
    steps.append((cell, HadamardProduct(gates["f"], cell(t - 1)) + HadamardProduct(gates["i"], gates["g"])))
    steps.append((hidden, HadamardProduct(gates["o"], tanh(cell()))))
    return Model(
        name="torch-lstm",
        title="LSTM with torch's stacked weights",
        source="PyTorch documentation, torch.nn.LSTM (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0)",
        sizes=(d, h, q),
        params=(W_ih, W_hh, b_ih, b_hh, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )
