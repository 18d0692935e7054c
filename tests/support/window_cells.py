"""A cell the window truncation got wrong (found by the random cells): z_t = tanh(U c_{t-1} + W_z x_t) and
h_t = z_t * c_t, so dL/dz_{t+1} comes from the head alone (a local adjoint), yet the flow into dL/dc_t reads
it. In a window it enters that flow at age 0 (tests/oracle/test_window_local_adjoint.py proves the
gradients; tests/codegen/passes/test_backward_passes.py the pass that gives it its age axis)."""

from sympy import HadamardProduct as odot

from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import SquaredError, t, tanh


def local_flow():
    d, h, q = sizes("d h q")
    W, R, U, W_z, V = matrix("W", h, d), matrix("R", h, h), matrix("U", h, h), matrix("W_z", h, d), matrix("V", q, h)
    x, c, z = sequence("x", d, "input"), sequence("c", h, "state"), sequence("z", h, "intermediate")
    hidden, s, y = sequence("h", h, "state"), sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name="local_flow",
        title="An intermediate read at t+1 whose adjoint is local",
        source="found by the random cells",
        sizes=(d, h, q),
        params=(W, R, U, W_z, V),
        inputs=(x,),
        steps=((c, tanh(W * x() + R * c(t - 1))), (z, tanh(U * c(t - 1) + W_z * x())), (hidden, odot(z(), c()))),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )
