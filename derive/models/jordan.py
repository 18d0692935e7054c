"""Output-to-hidden recurrence trained with teacher forcing (Goodfellow et al., 10.2.1).

The Jordan network feeds its previous output distribution o_{t-1} back into the
hidden layer. Under teacher forcing the true previous label onehot(y_{t-1})
takes its place, so no step reads a value computed by an earlier step: the
time steps decouple and BPTT reduces to a sum of per-step gradients.
"""

from bptt.derive.model import Model, labels, matrix, sequence, sizes, vector
from bptt.derive.models.elman import GOODFELLOW
from bptt.derive.nodes import OneHot, Softmax, SoftmaxCrossEntropy, t, tanh


def jordan_model(name, title, recurrent_hidden):
    d, h, q = sizes("d h q")
    U, R, V = matrix("U", h, d), matrix("R", h, q), matrix("V", q, h)
    b, c = vector("b", h), vector("c", q)
    x, y = sequence("x", d, "input"), labels("y", q)
    a, s = sequence("a", h, "intermediate"), sequence("s", q, "output")
    o = sequence("o", q, "state")
    hidden = sequence("h", h, "state" if recurrent_hidden else "intermediate")
    W = matrix("W", h, h)
    pre = b + R * o(t - 1) + U * x()
    if recurrent_hidden:
        pre = pre + W * hidden(t - 1)
    return Model(
        name=name,
        title=title,
        source="Deep Learning (Goodfellow, Bengio, Courville), section 10.2.1",
        sizes=(d, h, q),
        params=(U, W, R, V, b, c) if recurrent_hidden else (U, R, V, b, c),
        inputs=(x,),
        steps=((a, pre), (hidden, tanh(a())), (o, Softmax(c + V * hidden()))),
        outputs=((s, c + V * hidden()),),
        loss=SoftmaxCrossEntropy(s(), y()),
        teacher_forcing=((o, OneHot(y(), q)),),
        notes=(GOODFELLOW,),
    )


def jordan():
    return jordan_model("jordan", "Jordan RNN (output-to-hidden) with teacher forcing", False)


def elman_jordan():
    return jordan_model("elman-jordan", "Elman-Jordan RNN (hidden and output recurrence) with teacher forcing", True)
