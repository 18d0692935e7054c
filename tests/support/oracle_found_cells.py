"""Cells the oracle found wrong in the fast backward pass (NumPy and torch, full BPTT and chunk
truncation), written as users write them. Each has a gate z_t read inside z_t * (N h_{t-1} + e)
(or another sum), with no named pre-activations, and a linear head s_t = V h_t with the squared error.
The slope diag(N h_{t-1} + e) of dL/dz_t was hoisted as an array read at t-1, so step 1 read its
step 0, which no statement computes.

    unnamed_reset_gate                  z = sigmoid(W x_t), r = tanh(z * (N h_{t-1} + e)), h = r * z + (1 - r) * h_{t-1}
    unnamed_reset_gate_recurrent        the same with z = tanh(U h_{t-1})
    gate_reads_gate_times_sum           r = tanh(z * (N h_{t-1} + e)), h = r
    gate_reads_gate_times_sum_no_bias   r = tanh(z * (N h_{t-1} + U h_{t-1})), h = r
    gate_reads_gate_times_sum_identity  r = z * (N h_{t-1} + e), h = tanh(r)
    copy_state_gate_times_sum           r = tanh(U h_{t-1} + z * (N h_{t-1} + e)), h = r
    interpolate_unnamed_reset           z named tanh(U_z h_{t-1} + W x_t),
                                        r = tanh(U_r h_{t-1} + b + z * (N h_{t-1} + e)), h = (1 - z) * r + z * h_{t-1}
"""

from sympy import HadamardProduct as odot

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh

d, h, q = sizes("d h q")
x, hid = sequence("x", d, "input"), sequence("h", h, "state")
W, U, N, e = matrix("W", h, d), matrix("U", h, h), matrix("N", h, h), vector("e", h)
z, r = sequence("z", h, "intermediate"), sequence("r", h, "intermediate")


def _cell(name, steps, params):
    """A cell with the head s_t = V h_t and a squared error."""
    V, s, y = matrix("V", q, h), sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name=name,
        title=name,
        source="found by the oracle",
        sizes=(d, h, q),
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * hid()),),
        loss=SquaredError(s(), y()),
    )


def unnamed_reset_gate():
    steps = [(z, sigmoid(W * x())), (r, tanh(odot(z(), N * hid(t - 1) + e))), (hid, _reset(r(), z()))]
    return _cell("unnamed_reset_gate", steps, (W, N, e))


def unnamed_reset_gate_recurrent():
    steps = [(z, tanh(U * hid(t - 1))), (r, tanh(odot(z(), N * hid(t - 1) + e))), (hid, _reset(r(), z()))]
    return _cell("unnamed_reset_gate_recurrent", steps, (U, N, e))


def gate_reads_gate_times_sum():
    steps = [(z, sigmoid(W * x())), (r, tanh(odot(z(), N * hid(t - 1) + e))), (hid, r())]
    return _cell("gate_reads_gate_times_sum", steps, (W, N, e))


def gate_reads_gate_times_sum_no_bias():
    steps = [(z, sigmoid(W * x())), (r, tanh(odot(z(), N * hid(t - 1) + U * hid(t - 1)))), (hid, r())]
    return _cell("gate_reads_gate_times_sum_no_bias", steps, (W, N, U))


def gate_reads_gate_times_sum_identity():
    steps = [(z, sigmoid(W * x())), (r, odot(z(), N * hid(t - 1) + e)), (hid, tanh(r()))]
    return _cell("gate_reads_gate_times_sum_identity", steps, (W, N, e))


def copy_state_gate_times_sum():
    steps = [(z, sigmoid(W * x())), (r, tanh(U * hid(t - 1) + odot(z(), N * hid(t - 1) + e))), (hid, r())]
    return _cell("copy_state_gate_times_sum", steps, (W, U, N, e))


def interpolate_unnamed_reset():
    U_z, U_r, b = matrix("U_z", h, h), matrix("U_r", h, h), vector("b", h)
    z_bar = sequence("z_bar", h, "intermediate")
    steps = [
        (z_bar, U_z * hid(t - 1) + W * x()),
        (z, tanh(z_bar())),
        (r, tanh(U_r * hid(t - 1) + b + odot(z(), N * hid(t - 1) + e))),
        (hid, odot(1 - z(), r()) + odot(z(), hid(t - 1))),
    ]
    return _cell("interpolate_unnamed_reset", steps, (U_z, W, U_r, b, N, e))


def _reset(r_t, z_t):
    """h_t = r_t * z_t + (1 - r_t) * h_{t-1}."""
    return odot(r_t, z_t) + odot(1 - r_t, hid(t - 1))
