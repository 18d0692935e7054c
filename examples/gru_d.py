"""GRU-D (Che, Purushotham, Cho, Sontag and Liu, "Recurrent Neural Networks for Multivariate Time Series with
Missing Values", Scientific Reports 8, 2018), written as the paper writes it (its equations 5 to 9 and the GRU's):

    gamma_t = exp(-max(0, W_gamma delta_t + b_gamma))                 (input decay: W_gamma diagonal, as a vector)
    x^_t = m_t * x_t + (1 - m_t) * (gamma_x,t * x_last_t + (1 - gamma_x,t) * x_mean)
    h^_{t-1} = gamma_h,t * h_{t-1}                                     (hidden decay: W_gamma_h a full matrix)
    r_t = sigmoid(W_r x^_t + U_r h^_{t-1} + V_r m_t + b_r)
    z_t = sigmoid(W_z x^_t + U_z h^_{t-1} + V_z m_t + b_z)
    h~_t = tanh(W x^_t + U (r_t * h^_{t-1}) + V m_t + b)
    h_t = (1 - z_t) * h^_{t-1} + z_t * h~_t

with a head s_t = W_o h_t + b_o and a squared error against y_t. The model language takes one input sequence, so
the side inputs come stacked in it as the paper's preprocessing gives them: u_t = [x_t; m_t; delta_t; x_last_t]
(4d rows: the measurement, its observation mask, the time since it was last observed, its last observed value),
each named from its block of rows. x_mean (the empirical mean of each variable over the training set) is a
parameter: its gradient is returned, and a user who keeps it fixed, as the paper does, ignores it.

Try:  bptt latex examples/gru_d.py:gru_d --format md
      bptt check examples/gru_d.py:gru_d
"""

from sympy import HadamardProduct, OneMatrix

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, exp, relu, sigmoid, t, tanh


def gru_d():
    d, h, q = sizes("d h q")
    u, y = sequence("u", 4 * d, "input"), sequence("y", q, "target")
    sides = [sequence(name, d, "intermediate") for name in ("x", "m", "delta", "x_last")]
    x, m, delta, x_last = (side() for side in sides)
    ones_d, ones_h = OneMatrix(d, 1), OneMatrix(h, 1)
    w_gx, b_gx, W_gh, b_gh = vector("w_gx", d), vector("b_gx", d), matrix("W_gh", h, d), vector("b_gh", h)
    x_mean = vector("x_mean", d)
    gates = {name: (matrix(f"W_{name}", h, d), matrix(f"U_{name}", h, h), matrix(f"V_{name}", h, d)) for name in "rz"}
    W, U, V = matrix("W", h, d), matrix("U", h, h), matrix("V", h, d)
    b_r, b_z, b = vector("b_r", h), vector("b_z", h), vector("b", h)
    W_o, b_o = matrix("W_o", q, h), vector("b_o", q)
    state = sequence("h", h, "state")
    gamma_x, gamma_h = sequence("gamma_x", d, "intermediate"), sequence("gamma_h", h, "intermediate")
    x_hat, h_hat = sequence("x_hat", d, "intermediate"), sequence("h_hat", h, "intermediate")
    r, z, candidate = (sequence(name, h, "intermediate") for name in ("r", "z", "h_tilde"))

    def gate(name, bias):
        W_g, U_g, V_g = gates[name]
        return W_g * x_hat() + U_g * h_hat() + V_g * m + bias

    steps = (
        *((side, u()[k * d : (k + 1) * d, :]) for k, side in enumerate(sides)),  # the side inputs, named
        (gamma_x, exp(-relu(HadamardProduct(w_gx, delta) + b_gx))),
        (gamma_h, exp(-relu(W_gh * delta + b_gh))),
        (
            x_hat,
            HadamardProduct(m, x)
            + HadamardProduct(
                ones_d - m, HadamardProduct(gamma_x(), x_last) + HadamardProduct(ones_d - gamma_x(), x_mean)
            ),
        ),
        (h_hat, HadamardProduct(gamma_h(), state(t - 1))),
        (r, sigmoid(gate("r", b_r))),
        (z, sigmoid(gate("z", b_z))),
        (candidate, tanh(W * x_hat() + U * HadamardProduct(r(), h_hat()) + V * m + b)),
        (state, HadamardProduct(ones_h - z(), h_hat()) + HadamardProduct(z(), candidate())),
    )
    s = sequence("s", q, "output")
    return Model(
        name="gru-d",
        title="GRU-D: a GRU with input and hidden decay for missing values",
        source="Che et al. (2018), Recurrent Neural Networks for Multivariate Time Series with Missing Values",
        sizes=(d, h, q),
        params=(w_gx, b_gx, W_gh, b_gh, x_mean, *gates["r"], *gates["z"], W, U, V, b_r, b_z, b, W_o, b_o),
        inputs=(u,),
        steps=steps,
        outputs=((s, W_o * state() + b_o),),
        loss=SquaredError(s(), y()),
    )
