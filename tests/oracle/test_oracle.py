"""The oracle (tests/support/oracle.py), and every backend's generated module of every zoo model against it.

The oracle interprets the model's equations in torch and differentiates them with autograd; it shares
no code with codegen, so a backend that computes the wrong forward pass cannot prove itself here. It is
itself checked against central finite differences, and its evaluator against torch's own functions."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")


import dataclasses
import importlib

import numpy as np
import sympy as sp
import torch

from bptt.derive import elementwise
from bptt.derive.elementwise import FUNCTIONS, Apply
from bptt.derive.models import load
from bptt.derive.nodes import Diag, GenericLoss, SeqAt, t
from bptt.tests.support.oracle import compare, run
from bptt.tests.support.oracle import loss as oracle_loss
from bptt.tests.support.oracle_eval import OracleError, Scope, evaluate
from bptt.tests.support.zoo import supporting

SIZES = {"d": 2, "h": 3, "q": 4}  # distinct: a transposition cannot hide
T, B = 5, 3
TRUNCATIONS = [None, ("window", 2), ("chunk", 2)]
# test_oracle_cells.py calls the zoo GRU's modules on arrays of these shapes in these truncations: in one work
# unit (tests/conftest.py), each jitted function of the JAX module is compiled once for both files.
XDIST_GROUP = "zoo modules at T=5, B=3"
BACKENDS = {"numpy": "", "torch": "_torch", "jax": "_jax"}


def random_problem(model, seed, sizes=SIZES, steps=T, batch=B):
    """(params, xs, ys, initial) drawn from the model's description alone: parameters in the maths'
    shapes (vectors 1-D), inputs and targets (labels where the model reads labels), non-zero initial states."""
    rng = np.random.default_rng(seed)
    bound = {symbol: sizes[symbol.name] for symbol in model.sizes}
    params = {}
    for symbol in model.params:
        rows, cols = (int(dim.xreplace(bound)) for dim in symbol.shape)
        params[symbol.name] = rng.standard_normal((rows,) if cols == 1 else (rows, cols)) / np.sqrt(cols)

    def data(seq):
        rows = int(seq.rows.xreplace(bound))
        if seq.role == "label":
            return rng.integers(0, rows, size=(steps, batch))
        return rng.standard_normal((steps, batch, rows))

    xs, ys = data(model.inputs[0]), data(model.concrete_loss().target)
    initial = {seq.name: 0.5 * rng.standard_normal((batch, int(seq.rows.xreplace(bound)))) for seq in model.states}
    return params, xs, ys, initial


def central_differences(model, params, xs, ys, initial, step=1e-6):
    """dL/d(every parameter entry and initial state entry), by central differences of the oracle's loss."""
    arrays = {**params, **{f"{name}0": value for name, value in initial.items()}}
    grads = {}
    for key, array in arrays.items():
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            values = []
            for sign in (1, -1):
                moved = array.copy()
                moved[index] += sign * step
                p = {**params, key: moved} if key in params else params
                s = {**initial, key[:-1]: moved} if key not in params else initial
                values.append(oracle_loss(model, p, xs, ys, s))
            grad[index] = (values[0] - values[1]) / (2 * step)
        grads[key] = grad
    return grads


@pytest.mark.parametrize("name", ["elman-jordan", "elman-onehot", "lstm"])
def test_oracle_gradients_match_finite_differences(name):
    model = load(name)
    problem = random_problem(model, seed=3)
    result = run(model, *problem)
    numeric = central_differences(model, *problem)
    assert set(result.grads) == {p.name for p in model.params} | {f"{s.name}0" for s in model.states}
    for key, value in numeric.items():
        error = np.abs(result.grads[key] - value).max() / np.abs(value).max()
        assert error < 1e-7, f"{name}: {key}: oracle {result.grads[key]}, finite differences {value}"


def test_oracle_loss_is_the_papers_loss():
    """The linear model (a mean of squared errors) by hand, in NumPy."""
    model = load("linear")
    params, xs, ys, initial = random_problem(model, seed=1)
    h, total = initial["h"], 0.0
    for step in range(T):
        h = xs[step] @ params["W_hx"].T + h @ params["W_hh"].T
        total += 0.5 * ((h @ params["W_qh"].T - ys[step]) ** 2).sum()
    result = run(model, params, xs, ys, initial)
    assert abs(result.loss - total / (T * B)) < 1e-12 * abs(total)
    assert result.outputs["o"].shape == (T, B, SIZES["q"])


@pytest.mark.parametrize("truncate", [("window", T), ("chunk", T)])
def test_truncation_longer_than_the_sequence_is_full_bptt(truncate):
    model = load("lstm")
    problem = random_problem(model, seed=2)
    full, truncated = run(model, *problem), run(model, *problem, truncate=truncate)
    for key, value in full.grads.items():
        assert np.abs(truncated.grads[key] - value).max() < 1e-14, key


def test_window_of_one_step_cuts_the_initial_state_off_later_outputs():
    """Window 1: h_0 hears only output 1, so its gradient is the one-step model's."""
    model = load("elman")
    params, xs, ys, initial = random_problem(model, seed=5)
    windowed = run(model, params, xs, ys, initial, ("window", 1))
    one_step = run(model, params, xs[:1], ys[:1], initial)
    assert np.abs(windowed.grads["h0"] - one_step.grads["h0"]).max() < 1e-15


def test_window_treats_a_teacher_forced_state_as_data():
    """Window 1 on elman-jordan: h_0 (a state before step 1) hears output 1 only; o_0 (teacher-forced,
    data entering step 1 like x_1) hears every output whose window holds step 1: outputs 1 and 2."""
    model = load("elman-jordan")
    params, xs, ys, initial = random_problem(model, seed=5)
    windowed = run(model, params, xs, ys, initial, ("window", 1))
    for key, steps in (("h0", 1), ("o0", 2)):
        prefix = run(model, params, xs[:steps], ys[:steps], initial)
        assert np.abs(windowed.grads[key] - prefix.grads[key]).max() < 1e-15, key


# Each registry function's reference in torch (slopes f': autograd of f's reference).
REFERENCE = {
    "identity": lambda x: x,
    "step": lambda x: torch.heaviside(x, torch.tensor(0.0, dtype=x.dtype)),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "softplus": torch.nn.functional.softplus,
    "exp": torch.exp,
    "log": torch.log,
    "elu": torch.nn.functional.elu,
    "softsign": torch.nn.functional.softsign,
    "silu": torch.nn.functional.silu,
    "gelu": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "leaky_relu": torch.nn.functional.leaky_relu,
}
SLOPES = ("elu", "softsign", "gelu", "leaky_relu")


def slope(function):
    def derivative(x):
        x = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(function(x).sum(), x)
        return grad

    return derivative


REFERENCE |= {f"{name}'": slope(REFERENCE[name]) for name in SLOPES}


def test_every_registry_function_has_a_reference():
    """Every function bptt ships (registered by bptt.derive.elementwise, not by a test or a user's file)."""
    shipped = {name for name, entry in FUNCTIONS.items() if _defined_by_bptt(entry.scalar)}
    assert shipped == set(REFERENCE)


def _defined_by_bptt(scalar):
    module = scalar.__module__
    return module == elementwise.__name__ or module.startswith("sympy.")


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_elementwise_functions_by_their_scalar_form(name):
    column = torch.tensor([-3.0, -1.2, -0.3, 0.4, 0.9, 2.5], dtype=torch.float64)
    column = column.abs() if name == "log" else column
    values = torch.stack([column, 0.7 * column])[..., None]  # (B, rows, 1)
    a = SeqAt("a", t, 6, "intermediate")
    got = evaluate(Apply(name, a), Scope({}, {}, now={"a": values}))
    assert torch.allclose(got, REFERENCE[name](values), rtol=1e-14, atol=1e-15), name


def test_matrix_nodes_scalar_coefficients_transpose_blocks_and_ones():
    h = sp.Symbol("h", integer=True, positive=True)
    W, b = sp.MatrixSymbol("W", 2 * h, h), sp.MatrixSymbol("b", 2 * h, 1)
    x = SeqAt("x", t - 1, h, "state")
    expr = sp.Rational(1, 2) * W[h:, :].T * W[:h, :] * x + sp.OneMatrix(h, 1) - b[:h, :] + sp.Identity(h) * x
    rng = np.random.default_rng(0)
    W_, b_, x_ = rng.standard_normal((6, 3)), rng.standard_normal((6, 1)), rng.standard_normal((2, 3, 1))
    params = {"W": torch.tensor(W_), "b": torch.tensor(b_)}
    got = evaluate(expr, Scope({h: 3}, params, before={"x": torch.tensor(x_)})).numpy()
    expected = 0.5 * W_[3:].T @ W_[:3] @ x_ + 1 - b_[:3] + x_
    assert np.abs(got - expected).max() < 1e-14


def test_a_function_registered_anew_is_evaluated_by_its_new_form(monkeypatch):
    """The evaluator compiles each node once (oracle_eval.compiled); an elementwise function's registry entry is still
    read at each evaluation, so a node whose function was registered anew is not evaluated by the old form."""
    values = torch.tensor([[[0.5], [-2.0]]], dtype=torch.float64)
    node = Apply("tanh", SeqAt("a", t, 2, "intermediate"))
    assert torch.equal(evaluate(node, Scope({}, {}, now={"a": values})), torch.tanh(values))
    monkeypatch.setitem(FUNCTIONS, "tanh", dataclasses.replace(FUNCTIONS["tanh"], scalar=lambda z: z**2))
    assert torch.equal(evaluate(node, Scope({}, {}, now={"a": values})), values**2)


@pytest.mark.parametrize("node", [Diag(SeqAt("a", t, 3, "state")), GenericLoss(SeqAt("a", t, 3, "output"), 0)])
def test_a_node_without_a_rule_is_named(node):
    with pytest.raises(OracleError, match=type(node).__name__):
        evaluate(node, Scope({}, {}, now={"a": torch.zeros(2, 3, 1, dtype=torch.float64)}))


def test_an_input_of_the_wrong_shape_is_refused():
    model = load("elman")
    params, xs, ys, initial = random_problem(model, seed=1)
    with pytest.raises(OracleError, match=r"params\['W'\] has shape \(3, 2\)"):
        run(model, {**params, "W": params["W"][:, :2]}, xs, ys, initial)


@pytest.fixture(scope="module")
def problems():
    return {}


@pytest.fixture(scope="module")
def oracle_runs():
    """{(model name, truncate): the oracle's result on problems[name]}: one run for every backend."""
    return {}


@pytest.mark.parametrize("truncate", TRUNCATIONS, ids=["full", "window2", "chunk2"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", supporting("truncate"))
def test_backend_agrees_with_the_oracle(name, backend, truncate, problems, oracle_runs):
    """forward, loss_and_grads and (in full BPTT, which it computes) forward_mode_grads against the oracle: for
    JAX this is the proof of its forward mode (scanned, compiled; teacher forcing, one-hot inputs, a mean loss,
    two states), which test_backend_jax.py once checked against its own BPTT."""
    model = load(name)
    module = importlib.import_module("bptt.generated." + name.replace("-", "_") + BACKENDS[backend])
    if name not in problems:
        problems[name] = random_problem(model, seed=len(name))
    if (name, truncate) not in oracle_runs:
        oracle_runs[name, truncate] = run(model, *problems[name], truncate)
    expected = oracle_runs[name, truncate]
    forward_mode = truncate is None and name in supporting("forward_mode_grads")
    compare(module, model, *problems[name], truncate=truncate, forward_mode=forward_mode, expected=expected)


def test_the_oracle_catches_a_wrong_forward_mode(problems, monkeypatch):
    """Control: forward_mode_grads of the NumPy elman module with dL/dW doubled fails the comparison, naming it."""
    model = load("elman")
    module = importlib.import_module("bptt.generated.elman")
    original = module.forward_mode_grads

    def doubled(*args, **kwargs):
        loss, grads = original(*args, **kwargs)
        return loss, {**grads, "W": 2 * grads["W"]}

    monkeypatch.setattr(module, "forward_mode_grads", doubled)
    problem = problems.setdefault("elman", random_problem(model, seed=len("elman")))
    compare(module, model, *problem)  # loss_and_grads alone agrees
    with pytest.raises(AssertionError, match=r"^forward mode: gradient W differs from the oracle"):
        compare(module, model, *problem, forward_mode=True)
