"""The Elman RNN with softmax outputs and cross-entropy (Goodfellow et al., 10.2.2)."""

from bptt.derive.model import Model, labels, matrix, sequence, sizes, vector
from bptt.derive.nodes import Softmax, SoftmaxCrossEntropy, t, tanh

# Goodfellow et al.'s names for this model's scores s_t and their softmax o_t
GOODFELLOW = (
    "Goodfellow et al. write $\\mathbf{o}_t$ for the scores $\\mathbf{s}_t$ here, and "
    "$\\hat{\\mathbf{y}}_t$ for their softmax $\\mathbf{o}_t$."
)


def elman():
    d, h, q = sizes("d h q")
    U, W, V = matrix("U", h, d), matrix("W", h, h), matrix("V", q, h)
    b, c = vector("b", h), vector("c", q)
    x, a, hidden = sequence("x", d, "input"), sequence("a", h, "intermediate"), sequence("h", h, "state")
    s, o, y = sequence("s", q, "output"), sequence("o", q, "intermediate"), labels("y", q)
    return Model(
        name="elman",
        title="Elman RNN with softmax cross-entropy (Goodfellow et al., 10.2.2)",
        source="Deep Learning (Goodfellow, Bengio, Courville), section 10.2.2",
        sizes=(d, h, q),
        params=(U, W, V, b, c),
        inputs=(x,),
        steps=(
            (a, b + W * hidden(t - 1) + U * x()),
            (hidden, tanh(a())),
        ),
        outputs=((s, c + V * hidden()),),
        loss=SoftmaxCrossEntropy(s(), y()),
        names=((o, Softmax(s())),),
        notes=(GOODFELLOW,),
    )
