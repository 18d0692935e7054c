"""The gated cells read as their sources: torch's parameter names and equations for `lstm`
and `gru`, and the backward pass of `lstm-peephole` laid side by side with the appendix of
Greff et al., "LSTM: A Search Space Odyssey" (2017), term for term."""

import numpy as np
import pytest
import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.explicit import evaluate
from bptt.derive.models import load
from bptt.derive.nodes import Adj, SeqAt, T, TimeSum, t
from bptt.tests.support.modules import module_of

TORCH_GATES = {"lstm": "ifgo", "gru": "rzn"}


@pytest.mark.parametrize("name", TORCH_GATES)
def test_torch_parameter_names(name):
    """W_i*, b_i*, W_h*, b_h* for each of torch's gates (torch.nn.LSTM: i f g o; torch.nn.GRU:
    r z n), in the model and in its generated module, plus the head's V."""
    torch = {f"{kind}_{side}{gate}" for gate in TORCH_GATES[name] for kind in "Wb" for side in "ih"}
    assert {p.name for p in load(name).params} == torch | {"V"}
    assert set(module_of(name).PARAMS) == torch | {"V"}


def sigmoid(a):
    return 1 / (1 + np.exp(-a))


def torch_lstm(p, xs, h, c):
    """torch.nn.LSTM's documented equations, step by step: the hidden and cell states."""
    hs, cs = [h], [c]
    for x in xs:
        gate = {g: x @ p[f"W_i{g}"].T + p[f"b_i{g}"] + h @ p[f"W_h{g}"].T + p[f"b_h{g}"] for g in "ifgo"}
        i, f, g, o = sigmoid(gate["i"]), sigmoid(gate["f"]), np.tanh(gate["g"]), sigmoid(gate["o"])
        c = f * c + i * g
        h = o * np.tanh(c)
        hs, cs = hs + [h], cs + [c]
    return {"h": np.array(hs), "c": np.array(cs)}


def torch_gru(p, xs, h, reset_after=True):
    """torch.nn.GRU's documented equations: n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn)).
    reset_after=False is Cho et al.'s original, r applied to h_{t-1} before W_hn (not torch's)."""
    hs = [h]
    for x in xs:
        r = sigmoid(x @ p["W_ir"].T + p["b_ir"] + h @ p["W_hr"].T + p["b_hr"])
        z = sigmoid(x @ p["W_iz"].T + p["b_iz"] + h @ p["W_hz"].T + p["b_hz"])
        hidden = r * (h @ p["W_hn"].T + p["b_hn"]) if reset_after else (r * h) @ p["W_hn"].T + p["b_hn"]
        n = np.tanh(x @ p["W_in"].T + p["b_in"] + hidden)
        h = (1 - z) * n + z * h
        hs.append(h)
    return {"h": np.array(hs)}


def run(name, seed=0, T=4, B=3):
    """The generated forward pass at d=2, h=3, q=4: (params, xs, initial states, cache, outputs)."""
    module = module_of(name)
    rng = np.random.default_rng(seed)
    sizes = {"d": 2, "h": 3, "q": 4}
    params = module.init_params(rng, **sizes)
    xs, _ = module.random_inputs(rng, T, B, **sizes)
    initial = {key: rng.standard_normal((B, 3)) for key in module.STATES}
    outputs, cache = module.forward(params, xs, **initial)
    return params, xs, initial, cache, outputs


def test_lstm_runs_torch_equations():
    params, xs, initial, cache, outputs = run("lstm")
    expected = torch_lstm(params, xs, initial["h0"], initial["c0"])
    for state in ("h", "c"):
        np.testing.assert_allclose(cache[state], expected[state], rtol=1e-13, atol=1e-15, err_msg=state)
    np.testing.assert_allclose(outputs, expected["h"][1:] @ params["V"].T, rtol=1e-13, atol=1e-15)


def test_gru_runs_torch_equations_with_r_applied_after_w_hn():
    """torch's GRU, and not Cho et al.'s original (which the comparison tells apart)."""
    params, xs, initial, cache, outputs = run("gru")
    expected = torch_gru(params, xs, initial["h0"])["h"]
    np.testing.assert_allclose(cache["h"], expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(outputs, expected[1:] @ params["V"].T, rtol=1e-13, atol=1e-15)
    original = torch_gru(params, xs, initial["h0"], reset_after=False)["h"]
    assert np.abs(original[1:] - expected[1:]).min() > 1e-6


# Greff et al.'s appendix, built here in plain SymPy on explicit matrices of symbols.
# Their y_t is our h_t, their Delta_t = V^T dL/ds_t; g = h = tanh. At time t every value is a
# vector of symbols, except that each gate is its activation of its pre-activation's symbols.
H = 3  # the hidden size of the comparison (q = 4, d = 2: distinct)
GATES = {"z": sp.tanh, "i": None, "f": None, "o": None}  # None: the logistic sigmoid


def logistic(u):
    return 1 / (1 + sp.exp(-u))


def activation(gate):
    return GATES[gate] or logistic


def symbols(name, rows, cols=1):
    return sp.ImmutableMatrix(rows, cols, lambda i, j: sp.Symbol(f"{name}[{i},{j}]"))


def value(name, time):
    """The value of sequence `name` at `time` (an integer)."""
    if name in GATES:
        return value(f"{name}_bar", time).applyfunc(activation(name))
    rows = {"x": 2, "s": 4}.get(name, H)
    return symbols(f"{name}{time}", rows)


def adjoint(name, time):
    return symbols(f"dL/d{name}{time}", 4 if name == "s" else H)


def param(name):
    rows, cols = {"V": (4, H), "W": (H, 2), "R": (H, H)}.get(name[0], (H, 1))
    return symbols(name, rows, cols)


def slope(gate, time):
    """The activation's derivative at the pre-activation, by sympy.diff."""
    u = sp.Dummy("u")
    derivative = sp.diff(activation(gate)(u), u)
    return value(f"{gate}_bar", time).applyfunc(lambda a: derivative.subs(u, a))


def hadamard(*vectors):
    out = vectors[0]
    for v in vectors[1:]:
        out = out.multiply_elementwise(v)
    return sp.ImmutableMatrix(out)


def greff(name, k):
    """Greff et al.'s backward pass for dL/d name_k: {(adjoint read, its time): the term}."""
    if name == "h":  # delta y_t
        terms = {(f"{g}_bar", k + 1): param(f"R_{g}").T * adjoint(f"{g}_bar", k + 1) for g in "zifo"}
        return {("s", k): param("V").T * adjoint("s", k), **terms}
    if name == "c":
        tanh_slope = value("c", k).applyfunc(lambda a: sp.diff(sp.tanh(a), a))
        return {
            ("h", k): hadamard(adjoint("h", k), value("o", k), tanh_slope),
            ("o_bar", k): hadamard(param("p_o"), adjoint("o_bar", k)),
            ("i_bar", k + 1): hadamard(param("p_i"), adjoint("i_bar", k + 1)),
            ("f_bar", k + 1): hadamard(param("p_f"), adjoint("f_bar", k + 1)),
            ("c", k + 1): hadamard(adjoint("c", k + 1), value("f", k + 1)),
        }
    gate = name[0]
    if gate == "o":
        return {("h", k): hadamard(adjoint("h", k), value("c", k).applyfunc(sp.tanh), slope("o", k))}
    factor = {"f": value("c", k - 1), "i": value("z", k), "z": value("i", k)}[gate]
    return {("c", k): hadamard(adjoint("c", k), factor, slope(gate, k))}


def zoo_env(expr, model):
    """Explicit values for every sequence, adjoint, parameter and size that expr reads."""
    env = dict(zip(model.sizes, (2, H, 4), strict=True))
    env |= {p: param(p.name) for p in model.params}
    env |= {node: value(node.name, int(node.time)) for node in expr.atoms(SeqAt)}
    env |= {node: adjoint(node.of.name, int(node.of.time)) for node in expr.atoms(Adj)}
    return env


def zoo_terms(expr, model):
    """{(adjoint read, its time): the term, explicit} for a derived sum of terms at a concrete time."""
    terms = {}
    for term in expr.args if isinstance(expr, sp.MatAdd) else (expr,):
        (read,) = term.atoms(Adj)
        key = (read.of.name, int(read.of.time))
        assert key not in terms, f"two terms read {key}: {expr}"
        terms[key] = evaluate(term, zoo_env(term, model), 2)
    return terms


def same(a, b):
    """Exactly equal, as rational functions of the symbols, exp(-u) and tanh(u)."""
    return a.shape == b.shape and all(sp.cancel(x - y) == 0 for x, y in zip(a, b, strict=True))


def assert_term_for_term(derived, textbook, what):
    assert set(derived) == set(textbook), f"{what}: derived terms read {sorted(derived)}, Greff's {sorted(textbook)}"
    for key, term in textbook.items():
        assert same(derived[key], term), f"{what}: the term reading dL/d{key[0]}_{key[1]} differs"


@pytest.fixture(scope="module")
def peephole():
    model = load("lstm-peephole")
    return model, derive(model, named="textbook")


def test_peephole_lstm_names_exactly_the_gate_adjoints(peephole):
    _, derivation = peephole
    assert {seq.name for seq in derivation.named} == {"z_bar", "i_bar", "f_bar", "o_bar"}


@pytest.mark.parametrize("name", ["h", "c"])
def test_peephole_lstm_state_recursions_are_greffs(peephole, name):
    """dL/dh_t and dL/dc_t for t < T (at t=1) and at t=T (T=2: the terms from T+1 absent)."""
    model, derivation = peephole
    (seq,) = [s for s in derivation.states if s.name == name]
    assert_term_for_term(zoo_terms(derivation.recursion(seq).subs(t, 1), model), greff(name, 1), f"dL/d{name}_t")
    at_end = {key: term for key, term in greff(name, 2).items() if key[1] == 2}
    assert_term_for_term(zoo_terms(derivation.terminal(seq).subs(T, 2), model), at_end, f"dL/d{name}_T")


@pytest.mark.parametrize("name", ["z_bar", "i_bar", "f_bar", "o_bar"])
def test_peephole_lstm_gate_adjoints_are_greffs(peephole, name):
    model, derivation = peephole
    (seq,) = [s for s in derivation.named if s.name == name]
    assert_term_for_term(zoo_terms(derivation.intermediate(seq).subs(t, 1), model), greff(name, 1), f"dL/d{name}_t")


def greff_parameter_step(name, k):
    """The step-k summand of Greff et al.'s parameter gradients (their sums of delta_{t+1} times
    a value at t, for R and p_i, p_f, shifted by one step to read delta_k and the value at k-1)."""
    gate = name[-1]
    if name.startswith("p_"):  # delta p_i = sum_t c_{t-1} * delta i_bar_t; p_o reads c_t
        return {(f"{gate}_bar", k): hadamard(value("c", k if gate == "o" else k - 1), adjoint(f"{gate}_bar", k))}
    if name == "V":
        return {("s", k): adjoint("s", k) * value("h", k).T}
    read = {"W": value("x", k).T, "R": value("h", k - 1).T, "b": sp.ImmutableMatrix([[1]])}[name[0]]
    return {(f"{gate}_bar", k): adjoint(f"{gate}_bar", k) * read}


def test_peephole_lstm_parameter_gradients_are_named_adjoints_times_inputs(peephole):
    """dL/dW = sum_{t=1}^T dL/dz_bar_t x_t^T, dL/dR = ... h_{t-1}^T, dL/dp_i = sum_t c_{t-1} * dL/di_bar_t, ..."""
    model, derivation = peephole
    for p in model.params:
        gradient = derivation.param_gradient(p)
        assert isinstance(gradient, TimeSum) and gradient.args[1:] == (t, 1, T), gradient
        step = zoo_terms(gradient.args[0].subs(t, 1), model)
        assert_term_for_term(step, greff_parameter_step(p.name, 1), f"dL/d{p.name}")
