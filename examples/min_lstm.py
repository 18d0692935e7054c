"""minLSTM as its paper writes it (Feng et al. 2024, "Were RNNs All We Needed?", sequential mode):
the gates read the input only, and are normalised so that they sum to one.

    f_t = sigmoid(W_f x_t + b_f)                forget gate
    i_t = sigmoid(W_i x_t + b_i)                input gate
    g_t = W_h x_t + b_h                         candidate state (the paper's h~_t)
    f_n_t = f_t / (f_t + i_t)                   normalised gates (the paper's f'_t, i'_t)
    i_n_t = i_t / (f_t + i_t)
    h_t = f_n_t * h_{t-1} + i_n_t * g_t         (elementwise)
    s_t = V h_t,   L = sum_t 1/2 ||s_t - y_t||^2

The division is an elementwise power, (f_t + i_t)^(-1).

Try:  bptt latex examples/min_lstm.py:min_lstm
      bptt check examples/min_lstm.py:min_lstm --backend all
"""

from sympy import HadamardPower, HadamardProduct

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t


def min_lstm():
    d, h, q = sizes("d h q")
    W_f, W_i, W_h = matrix("W_f", h, d), matrix("W_i", h, d), matrix("W_h", h, d)
    b_f, b_i, b_h = vector("b_f", h), vector("b_i", h), vector("b_h", h)
    V = matrix("V", q, h)
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    f, i, g = (sequence(name, h, "intermediate") for name in ("f", "i", "g"))
    f_norm, i_norm = sequence("f_n", h, "intermediate"), sequence("i_n", h, "intermediate")
    s, y = sequence("s", q, "output"), sequence("y", q, "target")
    total = HadamardPower(f() + i(), -1)
    return Model(
        name="min-lstm",
        title="minLSTM (Feng et al. 2024)",
        source="Feng, Tung, Ahmed, Bengio and Hajimirsadeghi, Were RNNs All We Needed? (2024), minLSTM",
        sizes=(d, h, q),
        params=(W_f, b_f, W_i, b_i, W_h, b_h, V),
        inputs=(x,),
        steps=(
            (f, sigmoid(W_f * x() + b_f)),
            (i, sigmoid(W_i * x() + b_i)),
            (g, W_h * x() + b_h),
            (f_norm, HadamardProduct(f(), total)),
            (i_norm, HadamardProduct(i(), total)),
            (hidden, HadamardProduct(f_norm(), hidden(t - 1)) + HadamardProduct(i_norm(), g())),
        ),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )
