"""A two-layer LSTM, as torch.nn.LSTM(num_layers=2) computes it: layer 2 reads layer 1's h1_t
at the same step. `lstm` keeps torch's stacked layout: W_ih1 (4h x d), W_hh1 (4h x h), b_ih1,
b_hh1 (4h), then W_ih2 (4h x h), W_hh2 (4h x h), b_ih2, b_hh2, each gate reading its block of
rows in torch's order i, f, g, o (W_ih1[h:2h, :] for layer 1's forget gate). `separate` is
the same cell with one matrix per gate (W_ii1, W_hi1, b_ii1, b_hi1, ...). A head s_t = V h2_t
with a squared error stands in for the layers above.

Try:  bptt latex examples/lstm_2layer.py:lstm --format md
      bptt check examples/lstm_2layer.py:separate
"""

from sympy import HadamardProduct

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh

GATES = (("i", sigmoid), ("f", sigmoid), ("g", tanh), ("o", sigmoid))
SOURCE = "PyTorch documentation, torch.nn.LSTM with num_layers=2"


def _layer(layer, gate_inputs, hidden, cell):
    """One layer's steps: each gate's pre-activation gate_inputs(k, gate), its activation, then the cell
    and hidden state."""
    steps, gates = [], {}
    for k, (gate, activation) in enumerate(GATES):
        bar = sequence(f"{gate}{layer}_bar", cell.rows, "intermediate")
        value = sequence(f"{gate}{layer}", cell.rows, "intermediate")
        steps += [(bar, gate_inputs(k, gate)), (value, activation(bar()))]
        gates[gate] = value()
    steps.append((cell, HadamardProduct(gates["f"], cell(t - 1)) + HadamardProduct(gates["i"], gates["g"])))
    steps.append((hidden, HadamardProduct(gates["o"], tanh(cell()))))
    return steps


def _model(name, title, layer_params):
    """The two layers from layer_params(layer, rows_in, h, below, hidden) -> (params, gate_inputs):
    gate k's pre-activation reads `below` (x, or h1 for layer 2) at t and the layer's `hidden` at t-1."""
    d, h, q = sizes("d h q")
    x = sequence("x", d, "input")
    states = [(sequence(f"h{k}", h, "state"), sequence(f"c{k}", h, "state")) for k in (1, 2)]
    params, steps = [], []
    below, rows_in = x, d
    for layer, (hidden, cell) in enumerate(states, start=1):
        weights, gate_inputs = layer_params(layer, rows_in, h, below, hidden)
        params += weights
        steps += _layer(layer, gate_inputs, hidden, cell)
        below, rows_in = hidden, h
    V, s, y = matrix("V", q, h), sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name=name,
        title=title,
        source=SOURCE,
        sizes=(d, h, q),
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * states[1][0]()),),
        loss=SquaredError(s(), y()),
    )


def _stacked(layer, rows_in, h, below, hidden):
    """torch's weight_ih_l{layer-1} and the rest: the four gates' weights stacked by rows."""
    W_ih, W_hh = matrix(f"W_ih{layer}", 4 * h, rows_in), matrix(f"W_hh{layer}", 4 * h, h)
    b_ih, b_hh = vector(f"b_ih{layer}", 4 * h), vector(f"b_hh{layer}", 4 * h)

    def gate_inputs(k, gate):
        rows = slice(k * h, (k + 1) * h)
        return W_ih[rows, :] * below() + b_ih[rows, :] + W_hh[rows, :] * hidden(t - 1) + b_hh[rows, :]

    return (W_ih, W_hh, b_ih, b_hh), gate_inputs


def _separate(layer, rows_in, h, below, hidden):
    """One matrix and bias per gate: W_i{gate}{layer} below_t + b_i.. + W_h{gate}{layer} h_{t-1} + b_h.."""
    weights, inputs = [], {}
    for gate, _ in GATES:
        W_x, b_x = matrix(f"W_i{gate}{layer}", h, rows_in), vector(f"b_i{gate}{layer}", h)
        W_h, b_h = matrix(f"W_h{gate}{layer}", h, h), vector(f"b_h{gate}{layer}", h)
        weights += [W_x, b_x, W_h, b_h]
        inputs[gate] = W_x * below() + b_x + W_h * hidden(t - 1) + b_h
    return tuple(weights), lambda k, gate: inputs[gate]


def lstm():
    return _model("lstm-2layer", "Two-layer LSTM with torch's stacked weights", _stacked)


def separate():
    return _model("lstm-2layer-separate", "Two-layer LSTM, one matrix per gate", _separate)
