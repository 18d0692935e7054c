"""A user's own cell with two states: the LSTM (Hochreiter and Schmidhuber, 1997).

    f_t = sigmoid(W_f h_{t-1} + U_f x_t + b_f)      forget gate
    i_t = sigmoid(W_i h_{t-1} + U_i x_t + b_i)      input gate
    o_t = sigmoid(W_o h_{t-1} + U_o x_t + b_o)      output gate
    g_t = tanh(W_g h_{t-1} + U_g x_t + b_g)         candidate
    c_t = f_t * c_{t-1} + i_t * g_t                  cell state (elementwise)
    h_t = o_t * tanh(c_t)                            hidden state
    z_t = V h_t,   L = sum_t 1/2 ||z_t - y_t||^2

Try:  bptt latex examples/lstm.py:lstm --format md
      bptt check examples/lstm.py:lstm
"""

from sympy import HadamardProduct

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh


def lstm():
    d, h, q = sizes("d h q")
    x, hidden, cell = sequence("x", d, "input"), sequence("h", h, "state"), sequence("c", h, "state")
    z, y = sequence("z", q, "output"), sequence("y", q, "target")
    params, steps = [], []
    for gate, activation in (("f", sigmoid), ("i", sigmoid), ("o", sigmoid), ("g", tanh)):
        W, U, b = matrix(f"W_{gate}", h, h), matrix(f"U_{gate}", h, d), vector(f"b_{gate}", h)
        params += [W, U, b]
        steps.append((sequence(gate, h, "intermediate"), activation(W * hidden(t - 1) + U * x() + b)))
    f, i, o, g = (seq for seq, _ in steps)
    V = matrix("V", q, h)
    steps.append((cell, HadamardProduct(f(), cell(t - 1)) + HadamardProduct(i(), g())))
    steps.append((hidden, HadamardProduct(o(), tanh(cell()))))
    return Model(
        name="lstm",
        title="LSTM (user example)",
        source="examples/lstm.py",
        sizes=(d, h, q),
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((z, V * hidden()),),
        loss=SquaredError(z(), y()),
    )
