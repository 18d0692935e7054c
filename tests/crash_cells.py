"""Small users' cells that crashed codegen (found by random cells): a gate that nothing reads, a state
read only through a flat function (step), a hoisted part that is zero, a state with no recurrence.
Each is a Model function; test_crash_cells.py sends every one through every backend against the oracle.
ZERO: the gradients that are zero in each cell, exactly."""

from sympy import HadamardProduct as odot

from bptt.derive.elementwise import step
from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh

d, h, q = sizes("d h q")
x, hid = sequence("x", d, "input"), sequence("h", h, "state")
s, y = sequence("s", q, "output"), sequence("y", q, "target")
W, U, V = matrix("W", h, d), matrix("U", h, h), matrix("V", q, h)


def _cell(steps, params):
    return Model(name="cell", title="", source="", sizes=(d, h, q), params=(*params, V), inputs=(x,),
                 steps=tuple(steps), outputs=((s, V * hid()),), loss=SquaredError(s(), y()))


def unread_gate():
    """z_t = sigmoid(W_z x_t) is computed and never read."""
    W_z, z = matrix("W_z", h, d), sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W_z * x())), (hid, tanh(W * x() + U * hid(t - 1)))], (W_z, W, U))


def input_only_in_unread_gate():
    """The only step that reads x_t is never read."""
    z = sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W * x())), (hid, tanh(U * hid(t - 1)))], (W, U))


def unread_gate_chain():
    """z_t feeds r_t, which nothing reads: neither gate's parameters reach the loss."""
    W_z, M = matrix("W_z", h, d), matrix("M", h, h)
    z, r = sequence("z", h, "intermediate"), sequence("r", h, "intermediate")
    steps = [(z, sigmoid(W_z * x())), (r, tanh(M * z())), (hid, tanh(W * x() + U * hid(t - 1)))]
    return _cell(steps, (W_z, M, W, U))


def step_state():
    """h_t = step(W x_t + U h_{t-1}): the step's slope is 0, so only V has a gradient."""
    return _cell([(hid, step(W * x() + U * hid(t - 1)))], (W, U))


def gate_through_step():
    """h_t = tanh(U h_{t-1} + step(z_t)) with z_t = sigmoid(W x_t): z is read, but only through step."""
    z = sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W * x())), (hid, tanh(U * hid(t - 1) + step(z())))], (W, U))


def fused_recurrent_drops_same_step_term():
    """h_t = tanh(M z_t + U h_{t-1}) beside z_t = sigmoid(W x_t + U_z h_{t-1}): the products of h_{t-1}
    are one fused product, so what h_t's array holds before the loop is zero."""
    U_z, M, z = matrix("U_z", h, h), matrix("M", h, h), sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W * x() + U_z * hid(t - 1))), (hid, tanh(M * z() + U * hid(t - 1)))], (W, U_z, M, U))


def no_recurrence():
    """h_t = tanh(W x_t): nothing reads h_0."""
    return _cell([(hid, tanh(W * x()))], (W,))


def no_recurrence_unread_gate():
    """h_t = tanh(W x_t) beside a gate z_t = sigmoid(W_z x_t) that nothing reads."""
    W_z, z = matrix("W_z", h, d), sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W_z * x())), (hid, tanh(W * x()))], (W_z, W))


def gated_without_recurrence():
    """h_t = z_t * tanh(W x_t), z_t = sigmoid(W_z x_t): gated, but no step reads h_{t-1}."""
    W_z, z = matrix("W_z", h, d), sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W_z * x())), (hid, odot(z(), tanh(W * x())))], (W_z, W))


ZERO = {
    "unread_gate": ("W_z",),
    "input_only_in_unread_gate": ("W",),
    "unread_gate_chain": ("W_z", "M"),
    "step_state": ("W", "U", "h0"),
    "gate_through_step": ("W",),
    "fused_recurrent_drops_same_step_term": (),
    "no_recurrence": ("h0",),
    "no_recurrence_unread_gate": ("W_z", "h0"),
    "gated_without_recurrence": ("h0",),
}
CELLS = tuple(ZERO)
