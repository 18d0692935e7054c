"""Pieces shared by the gradient-flow tests (tests/derive/test_flow.py, tests/generated/test_flow_measured.py)."""

import functools

from bptt.derive.flow import gradient_flow as derive_flow
from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import SquaredError, sigmoid, t


@functools.cache
def gradient_flow(model):
    """The flow of a model, derived once for the tests here (models are frozen, so they can be keys)."""
    return derive_flow(model)


def sigmoid_cell():
    """h_t = sigmoid(W h_{t-1} + U x_t), o_t = V h_t: a cell whose activation's slope is at most 1/4."""
    d, h, q = sizes("d h q")
    W, U, V = matrix("W", h, h), matrix("U", h, d), matrix("V", q, h)
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    o, y = sequence("o", q, "output"), sequence("y", q, "target")
    return Model(
        name="sigmoid-cell",
        title="A sigmoid cell",
        source="a test",
        sizes=(d, h, q),
        params=(W, U, V),
        inputs=(x,),
        steps=((hidden, sigmoid(W * hidden(t - 1) + U * x())),),
        outputs=((o, V * hidden()),),
        loss=SquaredError(o(), y()),
    )
