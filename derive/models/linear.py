"""d2l's RNN without biases and with the identity activation (seeds 000, 003)."""

from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import GenericLoss, SquaredError, t


def linear():
    d, h, q = sizes("d h q")
    W_hx, W_hh, W_qh = matrix("W_hx", h, d), matrix("W_hh", h, h), matrix("W_qh", q, h)
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    o, y = sequence("o", q, "output"), sequence("y", q, "target")
    return Model(
        name="linear",
        title="Linear RNN (d2l, Backpropagation Through Time)",
        source="Dive into Deep Learning, section 9.7 (Chinese edition 6.6)",
        sizes=(d, h, q),
        params=(W_hx, W_hh, W_qh),
        inputs=(x,),
        steps=((hidden, W_hx * x() + W_hh * hidden(t - 1)),),
        outputs=((o, W_qh * hidden()),),
        loss=GenericLoss(o(), y()),
        code_loss=SquaredError(o(), y()),
        mean=True,
        notes=(
            "Like the source, the derivation leaves the loss function $l$ general; a computation needs one, and "
            "takes the squared error "
            "$l(\\mathbf{o}_t, \\mathbf{y}_t) = \\tfrac12\\|\\mathbf{o}_t - \\mathbf{y}_t\\|^2$.",
        ),
    )
