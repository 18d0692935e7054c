"""A user's own cell: a minimal gated RNN with a sigmoid update gate.

    z_t = sigmoid(W_z h_{t-1} + U_z x_t)        update gate
    g_t = tanh(W_g h_{t-1} + U_g x_t)           candidate
    h_t = z_t * g_t + (1 - z_t) * h_{t-1}       gated state (elementwise)
    o_t = V h_t,   L = sum_t 1/2 ||o_t - y_t||^2

Try:  bptt latex examples/gated_rnn.py:gated_rnn
      bptt check examples/gated_rnn.py:gated_rnn
"""

from sympy import HadamardProduct

from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh


def gated_rnn():
    d, h, q = sizes("d h q")
    W_z, U_z = matrix("W_z", h, h), matrix("U_z", h, d)
    W_g, U_g = matrix("W_g", h, h), matrix("U_g", h, d)
    V = matrix("V", q, h)
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    z, g = sequence("z", h, "intermediate"), sequence("g", h, "intermediate")
    o, y = sequence("o", q, "output"), sequence("y", q, "target")
    keep = 1 - z()  # a scalar in a sum means that scalar times the ones vector
    return Model(
        name="gated-rnn",
        title="A gated RNN (user example)",
        source="examples/gated_rnn.py",
        sizes=(d, h, q),
        params=(W_z, U_z, W_g, U_g, V),
        inputs=(x,),
        steps=(
            (z, sigmoid(W_z * hidden(t - 1) + U_z * x())),
            (g, tanh(W_g * hidden(t - 1) + U_g * x())),
            (hidden, HadamardProduct(z(), g()) + HadamardProduct(keep, hidden(t - 1))),
        ),
        outputs=((o, V * hidden()),),
        loss=SquaredError(o(), y()),
    )
