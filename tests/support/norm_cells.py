"""Normalised cells as Model functions (`tests/support/norm_cells.py:layer_norm_elman`), for the proofs of mean,
sum, layer_norm and rms_norm (issue 28): the exact proof, the oracle against every backend."""

from sympy import HadamardPower, Rational
from sympy import HadamardProduct as odot

from bptt.derive.model import matrix, sequence, sizes, vector
from bptt.derive.nodes import layer_norm, mean, rms_norm, sigmoid, sum, t, tanh
from bptt.tests.support.paper_cells import _cell as paper_cell


def _cell(name, title, params, x, hidden, steps, sizes_):
    """A cell with the linear head s_t = V h_t and a squared error (paper_cells.py's)."""
    return paper_cell(name, title, "issue 28", sizes_, params, x, hidden, steps)


def layer_norm_elman():
    """An Elman cell with a layer norm (gain, bias, eps) on its pre-activation: h_t = tanh(LN(W h_{t-1} + U x_t))."""
    d, h, q = sizes("d h q")
    W, U, b = matrix("W", h, h), matrix("U", h, d), vector("b", h)
    gain, bias = vector("gamma", h), vector("beta", h)
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
    steps = (
        (a, W * hidden(t - 1) + U * x() + b),
        (hidden, tanh(layer_norm(a(), gain, bias, eps=Rational(1, 100)))),
    )
    return _cell("ln-elman", "Elman, layer-normalised", (W, U, b, gain, bias), x, hidden, steps, (d, h, q))


def rms_gru():
    """A GRU whose gates' pre-activations are RMS-normalised (gain, eps = 0) before their sigmoid; the candidate's
    recurrent part is normalised with no gain."""
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    r, z, n = (sequence(gate, h, "intermediate") for gate in "rzn")
    W = {gate: (matrix(f"W_{gate}", h, d), matrix(f"U_{gate}", h, h), vector(f"b_{gate}", h)) for gate in "rzn"}
    g_r, g_z = vector("g_r", h), vector("g_z", h)

    def pre(gate):
        W_x, W_h, b = W[gate]
        return W_x * x() + W_h * hidden(t - 1) + b

    W_n, U_n, b_n = W["n"]
    steps = (
        (r, sigmoid(rms_norm(pre("r"), g_r))),
        (z, sigmoid(rms_norm(pre("z"), g_z))),
        (n, tanh(W_n * x() + b_n + odot(r(), rms_norm(U_n * hidden(t - 1), eps=Rational(1, 1000))))),
        (hidden, odot(1 - z(), n()) + odot(z(), hidden(t - 1))),
    )
    params = [p for gate in "rzn" for p in W[gate]] + [g_r, g_z]
    return _cell("rms-gru", "GRU, RMS-normalised gates", params, x, hidden, steps, (d, h, q))


def reduced():
    """mean and sum written out: a centred pre-activation, a scalar of the previous state's sum of squares
    subtracted (broadcast), then a layer norm after the activation (no gain, no bias)."""
    d, h, q = sizes("d h q")
    W, U = matrix("W", h, h), matrix("U", h, d)
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
    act = sequence("g", h, "intermediate")
    shrink = HadamardPower(1 + sum(HadamardPower(hidden(t - 1), 2)) / 4, -Rational(1, 2))
    steps = (
        (a, W * hidden(t - 1) + U * x()),
        (act, tanh(a() - mean(a())) - shrink),
        (hidden, layer_norm(act(), eps=Rational(1, 10))),
    )
    return _cell("reduced", "mean and sum written out", (W, U), x, hidden, steps, (d, h, q))


def reduced_params():
    """mean and sum of parameters, values of no step and no sample (computed once per call): a_t = W h_{t-1} + U x_t
    + 1 mean(g), then h_t = tanh(a_t) sum(g) (the 1 x 1 value broadcast, multiplied) + 1 mean(b * b) (of an expression
    of parameters, added inside the loop)."""
    d, h, q = sizes("d h q")
    W, U, g, b = matrix("W", h, h), matrix("U", h, d), vector("g", h), vector("b", h)
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
    steps = (
        (a, W * hidden(t - 1) + U * x() + mean(g)),
        (hidden, tanh(a()) * sum(g) + mean(odot(b, b))),
    )
    return _cell("reduced-params", "mean and sum of parameters", (W, U, g, b), x, hidden, steps, (d, h, q))


def _lstm_states(gates, hidden, cell_state, normed_cell):
    """c_t = f_t * c_{t-1} + i_t * g_t, h_t = o_t * tanh(c_t), or of c_t's layer norm."""
    i, f, g, o = gates
    c_hat = layer_norm(cell_state(), eps=Rational(1, 100)) if normed_cell else cell_state()
    return (
        (cell_state, odot(f(), cell_state(t - 1)) + odot(i(), g())),
        (hidden, odot(o(), tanh(c_hat))),
    )


def lstm_sliced_norm():
    """Ba et al.'s layout with one stacked pre-activation: a_t = LN(W_ih x_t + W_hh h_{t-1} + b) of 4h rows, the
    gates its row slices, and the norm of c_t in h_t = o_t * tanh(LN(c_t)): the fused products write the 4h rows,
    the norm reads them all."""
    d, h, q = sizes("d h q")
    W_ih, W_hh, b = matrix("W_ih", 4 * h, d), matrix("W_hh", 4 * h, h), vector("b", 4 * h)
    gain, bias = vector("gamma", 4 * h), vector("beta", 4 * h)
    x, hidden, cell_state = sequence("x", d, "input"), sequence("h", h, "state"), sequence("c", h, "state")
    a = sequence("a", 4 * h, "intermediate")
    i, f, g, o = (sequence(name, h, "intermediate") for name in "ifgo")
    rows = {name: a()[k * h : (k + 1) * h, :] for k, name in enumerate("ifgo")}
    steps = (
        (a, layer_norm(W_ih * x() + W_hh * hidden(t - 1) + b, gain, bias, eps=Rational(1, 100))),
        (i, sigmoid(rows["i"])),
        (f, sigmoid(rows["f"])),
        (g, tanh(rows["g"])),
        (o, sigmoid(rows["o"])),
        *_lstm_states((i, f, g, o), hidden, cell_state, normed_cell=True),
    )
    return _cell(
        "lstm-sliced-norm",
        "LSTM, one normalised 4h pre-activation",
        (W_ih, W_hh, b, gain, bias),
        x,
        hidden,
        steps,
        (d, h, q),
    )


def lstm_gate_norms():
    """Each gate's stacked-weight pre-activation RMS-normalised before its activation (the products fuse into one
    GEMM of 4h rows, the sigmoids may be halved into one tanh): a norm reads its own gate's rows."""
    d, h, q = sizes("d h q")
    W_ih, W_hh, b = matrix("W_ih", 4 * h, d), matrix("W_hh", 4 * h, h), vector("b", 4 * h)
    x, hidden, cell_state = sequence("x", d, "input"), sequence("h", h, "state"), sequence("c", h, "state")
    gates = [sequence(name, h, "intermediate") for name in "ifgo"]
    gains = [vector(f"g_{name}", h) for name in "ifgo"]
    steps = []
    for k, (gate, gain) in enumerate(zip(gates, gains, strict=True)):
        block = slice(k * h, (k + 1) * h)
        pre = W_ih[block, :] * x() + W_hh[block, :] * hidden(t - 1) + b[block, :]
        steps.append((gate, (tanh if gate.name == "g" else sigmoid)(rms_norm(pre, gain, eps=Rational(1, 100)))))
    steps += _lstm_states(gates, hidden, cell_state, normed_cell=False)
    return _cell("lstm-gate-norms", "LSTM, RMS-normalised gates", (W_ih, W_hh, b, *gains), x, hidden, steps, (d, h, q))


def norm_in_gain():
    """Norms inside a norm's gain and bias: h_t = tanh(LN(a_t; gain sigmoid(RMS(P x_t)), bias LN(a_t))), each
    named in parts as the outer norm is."""
    d, h, q = sizes("d h q")
    W, U, P, b = matrix("W", h, h), matrix("U", h, d), matrix("P", h, d), vector("b", h)
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
    gain, bias = sigmoid(rms_norm(P * x())), layer_norm(a(), eps=Rational(1, 10))
    steps = (
        (a, W * hidden(t - 1) + U * x() + b),
        (hidden, tanh(layer_norm(a(), gain, bias, eps=Rational(1, 100)))),
    )
    return _cell("norm-in-gain", "a norm in a norm's gain and bias", (W, U, P, b), x, hidden, steps, (d, h, q))


def one_unit_norms():
    """Norms over a value of one unit, a_t = w x_t (w a 1 x d parameter), each scaling a column: its layer norm, a
    constant (a_hat_t = (a_t - mu_a_t) sigma_a_t^(-1) = 0: the bias beta alone), and its RMS norm, a_t (a_t^2 +
    eps)^(-1/2): h_t = tanh(W h_{t-1} + U x_t + u LN(a_t) + v RMS(a_t)). v / sigma of a v of one row is
    elementwise, not SymPy's product of 1 x 1 matrices (derive/column.py)."""
    d, h, q = sizes("d h q")
    W, U, w, u, v = matrix("W", h, h), matrix("U", h, d), matrix("w", 1, d), vector("u", h), vector("v", h)
    gain, bias = vector("gamma", 1), vector("beta", 1)
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", 1, "intermediate")
    normed = u * layer_norm(a(), gain, bias, eps=Rational(1, 100)) + v * rms_norm(a(), eps=Rational(1, 10))
    steps = ((a, w * x()), (hidden, tanh(W * hidden(t - 1) + U * x() + normed)))
    return _cell("one-unit-norms", "norms over one unit", (W, U, w, u, v, gain, bias), x, hidden, steps, (d, h, q))
