"""Cells users write from their papers, outside the zoo, as Model functions (`tests/support/paper_cells.py:mgu`);
proved by tests/oracle/test_paper_cells.py."""

from sympy import HadamardPower, Identity, Rational
from sympy import HadamardProduct as odot

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh


def _cell(name, title, source, sizes_, params, x, hidden, steps):
    """A cell with the linear head s_t = V h_t and a squared error."""
    d, h, q = sizes_
    V = matrix("V", q, h)
    s, y = sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name=name,
        title=title,
        source=source,
        sizes=sizes_,
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )


def gru_unnamed():
    """torch.nn.GRU's equations, no pre-activation named."""
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    weights = {}
    for gate in "rzn":
        weights[gate] = (
            matrix(f"W_i{gate}", h, d),
            vector(f"b_i{gate}", h),
            matrix(f"W_h{gate}", h, h),
            vector(f"b_h{gate}", h),
        )
    r, z, n = (sequence(gate, h, "intermediate") for gate in "rzn")

    def gate(name):
        W_x, b_x, W_h, b_h = weights[name]
        return W_x * x() + b_x + W_h * hidden(t - 1) + b_h

    W_in, b_in, W_hn, b_hn = weights["n"]
    steps = (
        (r, sigmoid(gate("r"))),
        (z, sigmoid(gate("z"))),
        (n, tanh(W_in * x() + b_in + odot(r(), W_hn * hidden(t - 1) + b_hn))),
        (hidden, odot(1 - z(), n()) + odot(z(), hidden(t - 1))),
    )
    params = [p for name in "rzn" for p in weights[name]]
    return _cell(
        "gru-unnamed", "torch.nn.GRU, no pre-activation named", "torch.nn.GRU", (d, h, q), params, x, hidden, steps
    )


def mgu():
    """The Minimal Gated Unit (Zhou, Wu, Zhang and Zhou, 2016)."""
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    W_f, U_f, b_f = matrix("W_f", h, d), matrix("U_f", h, h), vector("b_f", h)
    W_h, U_h, b_h = matrix("W_h", h, d), matrix("U_h", h, h), vector("b_h", h)
    f, candidate = sequence("f", h, "intermediate"), sequence("g", h, "intermediate")
    steps = (
        (f, sigmoid(W_f * x() + U_f * hidden(t - 1) + b_f)),
        (candidate, tanh(W_h * x() + U_h * odot(f(), hidden(t - 1)) + b_h)),
        (hidden, odot(1 - f(), hidden(t - 1)) + odot(f(), candidate())),
    )
    return _cell(
        "mgu", "Minimal Gated Unit", "Zhou et al. (2016)", (d, h, q), (W_f, U_f, b_f, W_h, U_h, b_h), x, hidden, steps
    )


def gru_cho():
    """Cho et al. (2014)'s GRU: the reset gate applied to h_{t-1} before U."""
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    W_r, U_r, W_z, U_z = matrix("W_r", h, d), matrix("U_r", h, h), matrix("W_z", h, d), matrix("U_z", h, h)
    W, U = matrix("W", h, d), matrix("U", h, h)
    r, z, candidate = (sequence(name, h, "intermediate") for name in ("r", "z", "g"))
    steps = (
        (r, sigmoid(W_r * x() + U_r * hidden(t - 1))),
        (z, sigmoid(W_z * x() + U_z * hidden(t - 1))),
        (candidate, tanh(W * x() + U * odot(r(), hidden(t - 1)))),
        (hidden, odot(z(), hidden(t - 1)) + odot(1 - z(), candidate())),
    )
    return _cell(
        "gru-cho",
        "GRU of Cho et al. (2014)",
        "Cho et al. (2014)",
        (d, h, q),
        (W_r, U_r, W_z, U_z, W, U),
        x,
        hidden,
        steps,
    )


def plus_one():
    """An Elman cell whose pre-activation adds the scalar 1: tanh(W x_t + U h_{t-1} + 1)."""
    d, h, q = sizes("d h q")
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    W, U = matrix("W", h, d), matrix("U", h, h)
    steps = ((hidden, tanh(W * x() + U * hidden(t - 1) + 1)),)
    return _cell("plus-one", "Elman cell with a scalar in its sum", "a user", (d, h, q), (W, U), x, hidden, steps)


def powered():
    """Issue 28's nodes in one cell: a damped antisymmetric weight, a transpose, an elementwise power and the square
    SymPy folds a_t * a_t into.

    a_t = (W - W^T - 1/4 I) h_{t-1} + U x_t
    h_t = a_t * (1 + a_t * a_t)^(-1/2) + 1/2 K^T (h_{t-1} * h_{t-1})
    """
    d, h, q = sizes("d h q")
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
    W, U, K = matrix("W", h, h), matrix("U", h, d), matrix("K", h, h)
    scale = HadamardPower(1 + odot(a(), a()), Rational(-1, 2))
    steps = (
        (a, (W - W.T - Identity(h) / 4) * hidden(t - 1) + U * x()),
        (hidden, odot(a(), scale) + K.T * odot(hidden(t - 1), hidden(t - 1)) / 2),
    )
    return _cell("powered", "Powers and transposes", "issue 28", (d, h, q), (W, U, K), x, hidden, steps)


def sliced_gates():
    """Gates that are slices of one 3h pre-activation, as Ba et al. split a normalised 4h vector; rows h+1..2h are
    read by no slice, so their adjoint is zero.

    a_t = W h_{t-1} + U x_t + b
    h_t = sigmoid(a_t[1:h]) * h_{t-1} + tanh(a_t[2h+1:3h])
    """
    d, h, q = sizes("d h q")
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", 3 * h, "intermediate")
    W, U, b = matrix("W", 3 * h, h), matrix("U", 3 * h, d), vector("b", 3 * h)
    steps = (
        (a, W * hidden(t - 1) + U * x() + b),
        (hidden, odot(sigmoid(a()[0:h, :]), hidden(t - 1)) + tanh(a()[2 * h : 3 * h, :])),
    )
    return _cell(
        "sliced-gates", "Gates sliced from one pre-activation", "issue 28", (d, h, q), (W, U, b), x, hidden, steps
    )


def sliced_state():
    """A 2h state read by slices: its first h rows by the next step, its last h rows by the head.

    s_t = tanh(W s_{t-1}[1:h] + U x_t + b)
    y_t = V s_t[h+1:2h]
    """
    d, h, q = sizes("d h q")
    x, state = sequence("x", d, "input"), sequence("s", 2 * h, "state")
    W, U, b, V = matrix("W", 2 * h, h), matrix("U", 2 * h, d), vector("b", 2 * h), matrix("V", q, h)
    out, y = sequence("o", q, "output"), sequence("y", q, "target")
    return Model(
        name="sliced-state",
        title="A state read by slices",
        source="issue 28",
        sizes=(d, h, q),
        params=(W, U, b, V),
        inputs=(x,),
        steps=((state, tanh(W * state(t - 1)[0:h, :] + U * x() + b)),),
        outputs=((out, V * state()[h : 2 * h, :]),),
        loss=SquaredError(out(), y()),
    )
