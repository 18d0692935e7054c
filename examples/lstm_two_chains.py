"""A two-layer LSTM with two chains per layer, in torch's layout, as torch.nn.LSTM(num_layers=2,
bidirectional=True) stores it, but with both chains run forward in time: layer 1's chains h1f and h1b read
x_t; each of layer 2's chains h2f and h2b reads both of layer 1's, [h1f_t; h1b_t], through column blocks of
its stacked W_ih2f or W_ih2b (4h x 2h): gate k reads W_ih2f[k*h:(k+1)*h, 0:h] h1f_t
+ W_ih2f[k*h:(k+1)*h, h:2*h] h1b_t. The head reads both chains of layer 2 through column blocks of V
(q x 2h): s_t = V[:, 0:h] h2f_t + V[:, h:2*h] h2b_t, with a squared error.

Try:  bptt latex examples/lstm_two_chains.py:lstm --format md
      bptt check examples/lstm_two_chains.py:lstm
"""

from sympy import HadamardProduct

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh

GATES = (("i", sigmoid), ("f", sigmoid), ("g", tanh), ("o", sigmoid))
CHAINS = ("f", "b")


def _chain(name, reads, h):
    """One chain's parameters and steps: torch's W_ih, W_hh, b_ih, b_hh of chain `name` (e.g. `2f`), each gate
    reading its block of rows; reads: the sequences below, each through its block of h columns of W_ih."""
    hidden, cell = sequence(f"h{name}", h, "state"), sequence(f"c{name}", h, "state")
    W_ih, W_hh = matrix(f"W_ih{name}", 4 * h, sum(seq.rows for seq in reads)), matrix(f"W_hh{name}", 4 * h, h)
    b_ih, b_hh = vector(f"b_ih{name}", 4 * h), vector(f"b_hh{name}", 4 * h)
    steps, gates = [], {}
    for k, (gate, activation) in enumerate(GATES):
        rows = slice(k * h, (k + 1) * h)
        below, start = b_ih[rows, :], 0
        for seq in reads:
            below += W_ih[rows, start : start + seq.rows] * seq()
            start += seq.rows
        bar, value = sequence(f"{gate}{name}_bar", h, "intermediate"), sequence(f"{gate}{name}", h, "intermediate")
        steps += [(bar, below + W_hh[rows, :] * hidden(t - 1) + b_hh[rows, :]), (value, activation(bar()))]
        gates[gate] = value()
    steps.append((cell, HadamardProduct(gates["f"], cell(t - 1)) + HadamardProduct(gates["i"], gates["g"])))
    steps.append((hidden, HadamardProduct(gates["o"], tanh(cell()))))
    return (W_ih, W_hh, b_ih, b_hh), steps, hidden


def lstm():
    d, h, q = sizes("d h q")
    x = sequence("x", d, "input")
    params, steps, below = [], [], [x]
    for layer in (1, 2):
        hiddens = []
        for chain in CHAINS:
            weights, chain_steps, hidden = _chain(f"{layer}{chain}", below, h)
            params += weights
            steps += chain_steps
            hiddens.append(hidden)
        below = hiddens
    V, s, y = matrix("V", q, 2 * h), sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name="lstm-two-chains",
        title="Two-layer LSTM of two chains each, in torch's layout",
        source="PyTorch documentation, torch.nn.LSTM with num_layers=2 and bidirectional=True, both chains forward",
        sizes=(d, h, q),
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V[:, 0:h] * below[0]() + V[:, h : 2 * h] * below[1]()),),
        loss=SquaredError(s(), y()),
    )
