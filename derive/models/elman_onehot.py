"""The Elman RNN of WildML's tutorial with one-hot word inputs (WildML RNN tutorial, part 3)."""

from bptt.derive.model import Model, labels, matrix, sequence, sizes
from bptt.derive.nodes import OneHot, SoftmaxCrossEntropy, t, tanh


def elman_onehot():
    d, h, q = sizes("d h q")  # vocabulary, hidden units, output classes (the seed has d = q = 8000, h = 100)
    U, W, V = matrix("U", h, d), matrix("W", h, h), matrix("V", q, h)
    x, s = labels("x", d), sequence("s", h, "state")
    z, y = sequence("z", q, "output"), labels("y", q)
    return Model(
        name="elman-onehot",
        title="Elman RNN with one-hot word inputs (WildML RNN tutorial, part 3)",
        source="Denny Britz, Recurrent Neural Networks Tutorial, part 3 (WildML)",
        sizes=(d, h, q),
        params=(U, W, V),
        inputs=(x,),
        steps=((s, tanh(U * OneHot(x(), d) + W * s(t - 1))),),
        outputs=((z, V * s()),),
        loss=SoftmaxCrossEntropy(z(), y()),
        notes=(
            "$\\mathbf{U} \\operatorname{onehot}(x_t)$ is column $x_t$ of $\\mathbf{U}$, so "
            "$\\partial L / \\partial \\mathbf{U}$ is zero but in the columns of the words that occur.",
        ),
    )
