"""A bidirectional Elman tagger: a forward state h_f read at t-1 and a reverse-time state h_b read at
t+1 (computed from the last step back to the first, from its initial value h_b at T+1), and a softmax
head reading both at each step, as torch.nn.RNN(bidirectional=True) with a linear layer on top.
`two_layers` stacks a second bidirectional layer that reads both directions of the first at the
same step, as torch.nn.RNN(bidirectional=True, num_layers=2).
The zoo's `birnn` is `birnn()`; examples/birnn.py offers both.
"""

from bptt.derive.model import Model, labels, matrix, sequence, sizes, vector
from bptt.derive.nodes import SoftmaxCrossEntropy, SquaredError, t, tanh

SOURCE = "Schuster and Paliwal (1997); torch.nn.RNN with bidirectional=True"
DIRECTIONS = (("f", t - 1), ("b", t + 1))  # the forward state reads its step t-1, the reverse state t+1


def bidirectional(name, title, layers=1, activation=tanh, tagger=True):
    """`layers` bidirectional Elman layers, layer l's directions reading both of layer l-1 at t, and a
    head s_t = V_f h_f,t + V_b h_b,t + c over the top layer: softmax cross-entropy against a label
    (tagger=True), else a squared error against a target."""
    d, h, q = sizes("d h q")
    x = sequence("x", d, "input")
    params, steps, below = [], [], [(x, d, "")]
    for layer in range(1, layers + 1):
        mark = str(layer) if layers > 1 else ""
        states = []
        for way, before in DIRECTIONS:
            state = sequence(f"h{mark}_{way}", h, "state")
            U, b = matrix(f"U{mark}_{way}", h, h), vector(f"b{mark}_{way}", h)
            reads = [(matrix(f"W{mark}_{way}{tag}", h, rows), seq) for seq, rows, tag in below]
            params += [W for W, _ in reads] + [U, b]
            total = sum((W * seq() for W, seq in reads[1:]), reads[0][0] * reads[0][1]())
            steps.append((state, activation(total + U * state(before) + b)))
            states.append((state, h, way))
        below = states
    heads = [(matrix(f"V_{way}", q, h), state) for state, _, way in below]
    c, s = vector("c", q), sequence("s", q, "output")
    target = labels("y", q) if tagger else sequence("y", q, "target")
    loss = SoftmaxCrossEntropy(s(), target()) if tagger else SquaredError(s(), target())
    return Model(
        name=name,
        title=title,
        source=SOURCE,
        sizes=(d, h, q),
        params=(*params, *(V for V, _ in heads), c),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, heads[0][0] * heads[0][1]() + heads[1][0] * heads[1][1]() + c),),
        loss=loss,
    )


def birnn():
    return bidirectional("birnn", "A bidirectional Elman tagger")


def two_layers():
    return bidirectional("birnn-2layer", "A two-layer bidirectional Elman tagger", layers=2)
