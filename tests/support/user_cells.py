"""Users' cells, written as users write them (one function per cell returning a Model, like
examples/*.py). Each has a linear head s_t = V h_t and the squared error 1/2 ||s_t - y_t||^2.

    lstm2_stacked   two-layer LSTM in torch.nn.LSTM(num_layers=2)'s layout (stacked gate weights)
    lstm2_gates     the same two-layer LSTM with one matrix per gate
    gru_unnamed     torch.nn.GRU's equations without named pre-activations
    mgu             the Minimal Gated Unit (Zhou, Wu, Zhang and Zhou, 2016)
    gru_cho         Cho et al.'s (2014) original GRU
    plus_one        tanh(W x_t + U h_{t-1} + 1)
    mean_among_terms  tanh(W h_{t-1} + U x_t + mean(x_t)): a mean broadcast in a sum, third as written
    elman2_chains   two Elman chains h1f, h1b in layer 1 (blocks of rows of W_ih1), layer 2 reading [h1f_t; h1b_t]
                    through blocks of columns of W_ih2, its head s_t = V[:, :h] h2_t + V[:, h:2h] h1b_t
"""

from sympy import HadamardProduct

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, mean, sigmoid, t, tanh

GATES = (("i", sigmoid), ("f", sigmoid), ("g", tanh), ("o", sigmoid))  # torch's order


def _model(name, source, dims, params, x, hidden, steps):
    """A cell with the head s_t = V h_t and a squared error."""
    d, h, q = dims
    V, s, y = matrix("V", q, h), sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name=name,
        title=name,
        source=source,
        sizes=dims,
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )


def _lstm_layer(layer, gate_weights, below, hidden, cell):
    """One LSTM layer's steps: gate pre-activations and gates, then c_t and h_t; gate_weights(k, gate)
    gives a gate's (W_ih, b_ih, W_hh, b_hh) blocks, `below` the layer's input at t."""
    steps, gates = [], {}
    for k, (gate, activation) in enumerate(GATES):
        W_ih, b_ih, W_hh, b_hh = gate_weights(k, gate)
        bar, value = (
            sequence(f"{gate}{layer}_bar", hidden.rows, "intermediate"),
            sequence(f"{gate}{layer}", hidden.rows, "intermediate"),
        )
        steps += [(bar, W_ih * below + b_ih + W_hh * hidden(t - 1) + b_hh), (value, activation(bar()))]
        gates[gate] = value()
    steps.append((cell, HadamardProduct(gates["f"], cell(t - 1)) + HadamardProduct(gates["i"], gates["g"])))
    steps.append((hidden, HadamardProduct(gates["o"], tanh(cell()))))
    return steps


def lstm2_stacked():
    d, h, q = sizes("d h q")
    x = sequence("x", d, "input")
    states = {n: sequence(n, h, "state") for n in ("h1", "c1", "h2", "c2")}
    params, steps = [], []
    for layer, (below, width) in enumerate(((x(), d), (states["h1"](), h)), start=1):
        W_ih, W_hh = matrix(f"W_ih{layer}", 4 * h, width), matrix(f"W_hh{layer}", 4 * h, h)
        b_ih, b_hh = vector(f"b_ih{layer}", 4 * h), vector(f"b_hh{layer}", 4 * h)
        params += [W_ih, W_hh, b_ih, b_hh]

        def blocks(k, gate, W_ih=W_ih, W_hh=W_hh, b_ih=b_ih, b_hh=b_hh):
            rows = slice(k * h, (k + 1) * h)
            return W_ih[rows, :], b_ih[rows, :], W_hh[rows, :], b_hh[rows, :]

        steps += _lstm_layer(layer, blocks, below, states[f"h{layer}"], states[f"c{layer}"])
    source = "PyTorch documentation, torch.nn.LSTM(num_layers=2): weight_ih_l0 ... bias_hh_l1"
    return _model("lstm2-stacked", source, (d, h, q), params, x, states["h2"], steps)


def lstm2_gates():
    d, h, q = sizes("d h q")
    x = sequence("x", d, "input")
    states = {n: sequence(n, h, "state") for n in ("h1", "c1", "h2", "c2")}
    params, steps = [], []
    for layer, (below, width) in enumerate(((x(), d), (states["h1"](), h)), start=1):
        weights = {}
        for gate, _ in GATES:
            weights[gate] = (
                matrix(f"W_i{gate}{layer}", h, width),
                vector(f"b_i{gate}{layer}", h),
                matrix(f"W_h{gate}{layer}", h, h),
                vector(f"b_h{gate}{layer}", h),
            )
            params += weights[gate]
        steps += _lstm_layer(layer, lambda k, gate, w=weights: w[gate], below, states[f"h{layer}"], states[f"c{layer}"])
    return _model(
        "lstm2-gates", "torch.nn.LSTM(num_layers=2), one matrix per gate", (d, h, q), params, x, states["h2"], steps
    )


def gru_unnamed():
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    r, z, n = (sequence(name, h, "intermediate") for name in "rzn")
    W = {name: matrix(f"W_{name}", h, d if name[0] == "i" else h) for name in ("ir", "iz", "in", "hr", "hz", "hn")}
    b = {name: vector(f"b_{name}", h) for name in ("ir", "iz", "in", "hr", "hz", "hn")}
    steps = [
        (r, sigmoid(W["ir"] * x() + b["ir"] + W["hr"] * hidden(t - 1) + b["hr"])),
        (z, sigmoid(W["iz"] * x() + b["iz"] + W["hz"] * hidden(t - 1) + b["hz"])),
        (n, tanh(W["in"] * x() + b["in"] + HadamardProduct(r(), W["hn"] * hidden(t - 1) + b["hn"]))),
        (hidden, HadamardProduct(1 - z(), n()) + HadamardProduct(z(), hidden(t - 1))),
    ]
    params = [*W.values(), *b.values()]
    return _model("gru-unnamed", "PyTorch documentation, torch.nn.GRU", (d, h, q), params, x, hidden, steps)


def mgu():
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    f, candidate = sequence("f", h, "intermediate"), sequence("h_tilde", h, "intermediate")
    W_f, U_f, b_f = matrix("W_f", h, d), matrix("U_f", h, h), vector("b_f", h)
    W_h, U_h, b_h = matrix("W_h", h, d), matrix("U_h", h, h), vector("b_h", h)
    steps = [
        (f, sigmoid(W_f * x() + U_f * hidden(t - 1) + b_f)),
        (candidate, tanh(W_h * x() + U_h * HadamardProduct(f(), hidden(t - 1)) + b_h)),
        (hidden, HadamardProduct(1 - f(), hidden(t - 1)) + HadamardProduct(f(), candidate())),
    ]
    source = "Zhou, Wu, Zhang and Zhou, Minimal Gated Unit for Recurrent Neural Networks (2016)"
    return _model("mgu", source, (d, h, q), [W_f, U_f, b_f, W_h, U_h, b_h], x, hidden, steps)


def gru_cho():
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    r, z, candidate = (sequence(name, h, "intermediate") for name in ("r", "z", "h_tilde"))
    W_r, U_r, W_z, U_z = matrix("W_r", h, d), matrix("U_r", h, h), matrix("W_z", h, d), matrix("U_z", h, h)
    W, U = matrix("W", h, d), matrix("U", h, h)
    steps = [
        (r, sigmoid(W_r * x() + U_r * hidden(t - 1))),
        (z, sigmoid(W_z * x() + U_z * hidden(t - 1))),
        (candidate, tanh(W * x() + U * HadamardProduct(r(), hidden(t - 1)))),
        (hidden, HadamardProduct(z(), hidden(t - 1)) + HadamardProduct(1 - z(), candidate())),
    ]
    source = "Cho et al., Learning Phrase Representations using RNN Encoder-Decoder (2014), section 2.3"
    return _model("gru-cho", source, (d, h, q), [W_r, U_r, W_z, U_z, W, U], x, hidden, steps)


def mean_among_terms():
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    W, U = matrix("W", h, h), matrix("U", h, d)
    steps = [(hidden, tanh(W * hidden(t - 1) + U * x() + mean(x())))]
    return _model("mean-among-terms", "a user's cell", (d, h, q), [W, U], x, hidden, steps)


def plus_one():
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    W, U = matrix("W", h, d), matrix("U", h, h)
    steps = [(hidden, tanh(W * x() + U * hidden(t - 1) + 1))]
    return _model("plus-one", "a user's cell", (d, h, q), [W, U], x, hidden, steps)


def elman2_chains():
    d, h, q = sizes("d h q")
    x = sequence("x", d, "input")
    forward, backward, top = (sequence(name, h, "state") for name in ("h1f", "h1b", "h2"))
    W_ih1, W_hh1f, W_hh1b = matrix("W_ih1", 2 * h, d), matrix("W_hh1f", h, h), matrix("W_hh1b", h, h)
    W_ih2, W_hh2, b_2 = matrix("W_ih2", h, 2 * h), matrix("W_hh2", h, h), vector("b_2", h)
    V, s, y = matrix("V", q, 2 * h), sequence("s", q, "output"), sequence("y", q, "target")
    steps = [
        (forward, tanh(W_ih1[:h, :] * x() + W_hh1f * forward(t - 1))),
        (backward, tanh(W_ih1[h : 2 * h, :] * x() + W_hh1b * backward(t - 1))),
        (top, tanh(W_ih2[:, :h] * forward() + W_ih2[:, h : 2 * h] * backward() + W_hh2 * top(t - 1) + b_2)),
    ]
    return Model(
        name="elman2-chains",
        title="Two Elman chains read by a second layer through blocks of columns",
        source="a user's cell: torch.nn.RNN(num_layers=2, bidirectional=True)'s layout, both chains forward",
        sizes=(d, h, q),
        params=(W_ih1, W_hh1f, W_hh1b, W_ih2, W_hh2, b_2, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V[:, :h] * top() + V[:, h : 2 * h] * backward()),),
        loss=SquaredError(s(), y()),
    )
