"""Small users' cells that crashed codegen (found by random cells): a gate that nothing reads, a state
read only through a flat function (step), a hoisted part that is zero, a state with no recurrence
(the JAX module once failed: a scan with nothing to scan over), a size that no array has whole (only 2d).
Each is a Model function; test_crash_cells.py sends every one through every backend against the oracle.
ZERO: the gradients that are zero in each cell, exactly."""

from bptt.derive.elementwise import step
from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh

d, h, q = sizes("d h q")
x, hid = sequence("x", d, "input"), sequence("h", h, "state")
s, y = sequence("s", q, "output"), sequence("y", q, "target")
W, U, V = matrix("W", h, d), matrix("U", h, h), matrix("V", q, h)


def _cell(steps, params):
    return Model(
        name="cell",
        title="",
        source="",
        sizes=(d, h, q),
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * hid()),),
        loss=SquaredError(s(), y()),
    )


def unread_gate():
    """z_t = sigmoid(W_z x_t) is computed and never read."""
    W_z, z = matrix("W_z", h, d), sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W_z * x())), (hid, tanh(W * x() + U * hid(t - 1)))], (W_z, W, U))


def input_only_in_unread_gate():
    """The only step that reads x_t is never read."""
    z = sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W * x())), (hid, tanh(U * hid(t - 1)))], (W, U))


def step_state():
    """h_t = step(W x_t + U h_{t-1}): the step's slope is 0, so only V has a gradient."""
    return _cell([(hid, step(W * x() + U * hid(t - 1)))], (W, U))


def fused_recurrent_drops_same_step_term():
    """h_t = tanh(M z_t + U h_{t-1}) beside z_t = sigmoid(W x_t + U_z h_{t-1}): the products of h_{t-1}
    are one fused product, so what h_t's array holds before the loop is zero."""
    U_z, M, z = matrix("U_z", h, h), matrix("M", h, h), sequence("z", h, "intermediate")
    return _cell([(z, sigmoid(W * x() + U_z * hid(t - 1))), (hid, tanh(M * z() + U * hid(t - 1)))], (W, U_z, M, U))


def unread_and_flat_gates():
    """No recurrence (nothing reads h_0); z_t feeds r_t, which nothing reads; g_t is read only through step:
    of the gates' parameters none reaches the loss."""
    W_z, M, W_g = matrix("W_z", h, d), matrix("M", h, h), matrix("W_g", h, d)
    z, r, g = (sequence(name, h, "intermediate") for name in ("z", "r", "g"))
    steps = [(z, sigmoid(W_z * x())), (r, tanh(M * z())), (g, sigmoid(W_g * x())), (hid, tanh(W * x() + step(g())))]
    return _cell(steps, (W_z, M, W_g, W))


def only_a_multiple_of_d():
    """x_t has 2d rows and U2 is h x 2d: no array has d rows or columns (the JAX module could not read d, and
    random_inputs drew sizes["2*d"])."""
    x2, U2 = sequence("x", 2 * d, "input"), matrix("U2", h, 2 * d)
    return Model(
        name="cell",
        title="",
        source="",
        sizes=(d, h, q),
        params=(U2, U, V),
        inputs=(x2,),
        steps=((hid, tanh(U2 * x2() + U * hid(t - 1))),),
        outputs=((s, V * hid()),),
        loss=SquaredError(s(), y()),
    )


ZERO = {
    "unread_gate": ("W_z",),
    "input_only_in_unread_gate": ("W",),
    "step_state": ("W", "U", "h0"),
    "fused_recurrent_drops_same_step_term": (),
    "unread_and_flat_gates": ("W_z", "M", "W_g", "h0"),
    "only_a_multiple_of_d": (),
}
CELLS = tuple(ZERO)
