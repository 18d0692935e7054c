"""AntisymmetricRNN as its paper writes it (Chang, Chen, Haber and Chi 2019, "AntisymmetricRNN: A Dynamical
System View on Recurrent Neural Networks", equation 12): a forward Euler step of an ODE whose Jacobian
W - W^T is antisymmetric, damped by gamma I.

    h_t = h_{t-1} + eps tanh((W - W^T - gamma I) h_{t-1} + V x_t + b)
    s_t = C h_t,   L = sum_t 1/2 ||s_t - y_t||^2

with the step eps = 1/10 and the diffusion gamma = 1/100 (the paper tunes both).

Try:  bptt latex examples/antisymmetric_rnn.py:antisymmetric_rnn
      bptt check examples/antisymmetric_rnn.py:antisymmetric_rnn --backend all
"""

from sympy import Identity, Rational

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, t, tanh

EPS, GAMMA = Rational(1, 10), Rational(1, 100)


def antisymmetric_rnn():
    d, h, q = sizes("d h q")
    W, V, b, C = matrix("W", h, h), matrix("V", h, d), vector("b", h), matrix("C", q, h)
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    s, y = sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name="antisymmetric-rnn",
        title="AntisymmetricRNN (Chang et al. 2019)",
        source="Chang, Chen, Haber and Chi, AntisymmetricRNN (ICLR 2019), equation 12",
        sizes=(d, h, q),
        params=(W, V, b, C),
        inputs=(x,),
        steps=((hidden, hidden(t - 1) + EPS * tanh((W - W.T - GAMMA * Identity(h)) * hidden(t - 1) + V * x() + b)),),
        outputs=((s, C * hidden()),),
        loss=SquaredError(s(), y()),
    )
