"""Ba, Kiros and Hinton's LayerNorm-LSTM, as their paper writes it (equations 20-22):

    (f_t, i_t, o_t, g_t) = LN(W_h h_{t-1}; α1, β1) + LN(W_x x_t; α2, β2) + b        (20)
    c_t = σ(f_t) ⊙ c_{t-1} + σ(i_t) ⊙ tanh(g_t)                                      (21)
    h_t = σ(o_t) ⊙ tanh(LN(c_t; α3, β3))                                             (22)

LN(z; α, β) = α ⊙ (z − μ)/σ + β, μ and σ the mean and deviation of z's units. The paper has no epsilon; here
σ = (var + ε)^½ with torch.nn.LayerNorm's ε = 10⁻⁵, for at h_0 = 0 the vector W_h h_0 is 0, whose deviation is 0.
The two norms of eq. 20 are of the whole 4h vectors, a_t here; the paper's gates are its four slices, and f_t, i_t, o_t,
g_t name their activations σ(·), σ(·), σ(·), tanh(·), as the zoo's lstm does (the same function; the backward then
reads the activated gates the forward kept, rather than computing them again). A linear head s_t = V h_t with a
squared error stands in for the layers above, as for the other gated cells.
"""

from sympy import HadamardProduct, Rational

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, layer_norm, sigmoid, t, tanh

ACTIVATIONS = {"f": sigmoid, "i": sigmoid, "o": sigmoid, "g": tanh}  # the gates' activations
EPS = Rational(1, 10**5)  # torch.nn.LayerNorm's; Ba et al. write none
BA = (
    "Ba, Kiros and Hinton, Layer Normalization (arXiv:1607.06450, 2016), equations 20-22: the layer-normalized "
    "LSTM of its supplementary material"
)


def lstm_layernorm():
    d, h, q = sizes("d h q")
    x, hidden, cell = sequence("x", d, "input"), sequence("h", h, "state"), sequence("c", h, "state")
    W_h, W_x, b = matrix("W_h", 4 * h, h), matrix("W_x", 4 * h, d), vector("b", 4 * h)
    alpha = {k: vector(f"alpha_{k}", 4 * h if k < 3 else h) for k in (1, 2, 3)}
    beta = {k: vector(f"beta_{k}", 4 * h if k < 3 else h) for k in (1, 2, 3)}
    a = sequence("a", 4 * h, "intermediate")
    gates = {name: sequence(name, h, "intermediate") for name in "fiog"}
    f, i, o, g = (gates[name]() for name in "fiog")
    V, s, y = matrix("V", q, h), sequence("s", q, "output"), sequence("y", q, "target")
    steps = (
        (
            a,
            layer_norm(W_h * hidden(t - 1), alpha[1], beta[1], EPS) + layer_norm(W_x * x(), alpha[2], beta[2], EPS) + b,
        ),
        *((gates[name], act(a()[k * h : (k + 1) * h, :])) for k, (name, act) in enumerate(ACTIVATIONS.items())),
        (cell, HadamardProduct(f, cell(t - 1)) + HadamardProduct(i, g)),
        (hidden, HadamardProduct(o, tanh(layer_norm(cell(), alpha[3], beta[3], EPS)))),
    )
    return Model(
        name="lstm-layernorm",
        title="LayerNorm-LSTM (Ba, Kiros and Hinton, 2016)",
        source=BA,
        sizes=(d, h, q),
        params=(W_h, W_x, b, alpha[1], beta[1], alpha[2], beta[2], alpha[3], beta[3], V),
        inputs=(x,),
        steps=steps,
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )
