"""Cells users write from their papers (tests/support/paper_cells.py), none from the zoo: torch.nn.GRU with no
pre-activation named, the Minimal Gated Unit, Cho et al.'s GRU (a matrix times a Hadamard product,
U (r_t ⊙ h_{t-1})), a scalar in a matrix sum (tanh(W x_t + U h_{t-1} + 1)), and gates sliced from one
pre-activation (a_t[1:h], a_t[2h+1:3h]). Each derives exactly,
prints, generates for every backend and agrees with finite differences."""

import importlib
import pathlib
import textwrap
import types

import mpmath
import numpy as np
import pytest
import sympy as sp

from bptt.app.bench import peers_torch
from bptt.app.verify.check import check, load_module
from bptt.app.verify.problem import problem
from bptt.codegen.printing.printer import RowPrinter
from bptt.derive.bptt import derive
from bptt.derive.explicit import backward, unroll
from bptt.derive.model import ModelError, matrix, sequence, sizes
from bptt.derive.models import load
from bptt.derive.nodes import Adj, SeqAt, t
from bptt.documents.render import document
from bptt.tests.support.brute_force import DIGITS, recorded_gradients
from bptt.tests.support.problems import make_problem

CELLS = pathlib.Path(__file__).parents[1] / "support" / "paper_cells.py"
NAMES = ("gru_unnamed", "mgu", "gru_cho", "plus_one", "sliced_gates")


def spec(name):
    return f"{CELLS}:{name}"


@pytest.fixture(scope="module", params=NAMES)
def cell(request):
    return request.param


@pytest.fixture(scope="module")
def numpy_module(cell):
    return load_module(load(spec(cell)), from_zoo=False)


def test_derivation_agrees_with_the_unrolled_loss_to_30_digits(cell):
    """Every naming of the adjoints against the chain rule over the unrolled loss, d=2, h=3, q=4, T=3."""
    case = make_problem(spec(cell), 3, seed=3)
    brute = recorded_gradients(case)
    env = case.values_env(DIGITS)
    unroll(case.model, case.steps, env)
    for named in ("none", "all", "textbook"):
        derived = backward(derive(case.model, named=named), case.steps, dict(env))
        assert set(derived) == set(case.entries)
        for name, symbols in case.entries.items():
            for index, symbol in np.ndenumerate(np.array(symbols.tolist(), dtype=object)):
                with mpmath.workdps(DIGITS):
                    got, want = mpmath.mpf(derived[name][index]), brute[symbol]
                    assert abs(got - want) <= mpmath.mpf(10) ** -30 * max(1, abs(want)), (named, name, index)


@pytest.mark.parametrize("truncate", [None, ("window", 2)])
def test_generated_gradients_match_finite_differences(numpy_module, truncate):
    rows = check(numpy_module, steps=5, batch=2, seed=4, truncate=truncate)
    assert {row.name for row in rows} == set(numpy_module.PARAMS) | set(numpy_module.STATES)
    assert all(row.ok for row in rows), "\n".join(f"{r.name}: {r.error:.1e}" for r in rows)


def test_forward_mode_equals_bptt(numpy_module):
    instance = problem(numpy_module, steps=6, batch=2, seed=5)
    _, grads = numpy_module.loss_and_grads(instance.params, instance.xs, instance.ys, **instance.initial)
    _, forward = numpy_module.forward_mode_grads(instance.params, instance.xs, instance.ys, **instance.initial)
    for key, grad in grads.items():
        assert np.abs(forward[key] - grad).max() <= 1e-10 * np.abs(grad).max(), key


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_framework_modules_equal_the_numpy_module(cell, numpy_module, backend):
    if backend == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    framework = importlib.import_module(backend)
    module = load_module(load(spec(cell)), from_zoo=False, backend=backend)
    instance = problem(numpy_module, steps=4, batch=3, seed=6)
    loss, grads = numpy_module.loss_and_grads(instance.params, instance.xs, instance.ys, **instance.initial)
    convert = framework.from_numpy if backend == "torch" else framework.numpy.asarray
    arrays = {key: convert(value) for key, value in {**instance.params, **instance.initial}.items()}
    params = {key: arrays[key] for key in instance.params}
    initial = {key: arrays[key] for key in instance.initial}
    other_loss, other = module.loss_and_grads(params, convert(instance.xs), convert(instance.ys), **initial)
    assert abs(float(other_loss) - loss) <= 1e-12 * abs(loss)
    for key, grad in grads.items():
        assert np.abs(np.asarray(other[key]) - grad).max() <= 1e-12 * np.abs(grad).max(), (backend, key)


def test_unnamed_gru_agrees_with_torch_nn_gru():
    """The cell of torch's documented equations, written with no pre-activation named, computes
    torch.nn.GRU's loss and gradients (same head, same loss) to 1e-14."""
    module = load_module(load(spec("gru_unnamed")), from_zoo=False)
    instance = problem(module, steps=5, batch=3, seed=7, sizes={"d": 2, "h": 3, "q": 4})
    loss, grads = module.loss_and_grads(instance.params, instance.xs, instance.ys, **instance.initial)
    run, collect = peers_torch.prepare(
        types.SimpleNamespace(name="gru"), instance.params, instance.xs, instance.ys, instance.initial
    )
    torch_loss, torch_grads = collect(run())
    assert abs(torch_loss - loss) <= 1e-14 * abs(loss)
    assert set(torch_grads) == set(grads)
    for key, grad in grads.items():
        assert np.abs(torch_grads[key] - grad).max() <= 1e-14 * np.abs(grad).max(), key


def test_a_matrix_times_a_hadamard_product_has_its_gradient_as_the_maths_writes_it():
    """dL/dU = sum_t ... (h_{t-1} ⊙ r_t)^T: the LaTeX keeps the transposed product whole."""
    latex = document(load(spec("gru_cho")), "md")
    assert r"\left(\mathbf{h}_{t-1} \odot \mathbf{r}_{t}\right)^\top" in latex


@pytest.mark.parametrize("operand", ["hadamard", "product"])
def test_a_gradient_term_with_any_vector_operand_is_one_product_over_all_steps(operand):
    """sum_t g_t v_t^T for v_t = r_t ⊙ h_{t-1}, or v_t = W x_t (the gradient of U in U W x_t), printed
    for all steps at once, equals the sum of the per-step outer products."""
    T, B, n = 4, 3, {"d": 2, "h": 3}
    d, h = sizes("d h")
    g, r, x = SeqAt("g", t, h, "intermediate"), SeqAt("r", t, h, "intermediate"), SeqAt("x", t, d, "input")
    hidden, W = SeqAt("h", t - 1, h, "state"), matrix("W", h, d)
    vector = sp.HadamardProduct(r, hidden) if operand == "hadamard" else W * x
    term = sp.MatMul(Adj(g), vector.T).doit(deep=False)
    code = RowPrinter(stacked=True).gradient_term(term)
    rng = np.random.default_rng(9)
    arrays = {"d_g": rng.standard_normal((T + 1, B, 3)), "r": rng.standard_normal((T + 1, B, 3))}
    arrays |= {"h": rng.standard_normal((T + 1, B, 3)), "x": rng.standard_normal((T, B, 2))}
    arrays |= {"W": rng.standard_normal((3, 2)), "n_h": n["h"], "n_d": n["d"], "np": np}
    got = eval(code, arrays)  # noqa: S307 (the printer's code, on test arrays)
    expected = sum(
        arrays["d_g"][k, b][:, None] @ v[None, :]
        for k in range(1, T + 1)
        for b in range(B)
        for v in [
            arrays["r"][k, b] * arrays["h"][k - 1, b] if operand == "hadamard" else arrays["W"] @ arrays["x"][k - 1, b]
        ]
    )
    np.testing.assert_allclose(got, expected, rtol=1e-13)


def test_a_scalar_in_a_matrix_sum_is_that_scalar_times_ones():
    """W x_t + U h_{t-1} + 1, 1 + W x_t, W x_t - 1/2 and (h_t ⊙ x_t) + 1: the scalar is c times the ones vector,
    through the derivation, its LaTeX and the generated module."""
    d, h = sizes("d h")
    W, U = matrix("W", h, d), matrix("U", h, h)
    x, hidden = sequence("x", h, "input"), sequence("h", h, "state")
    ones = sp.OneMatrix(h, 1)
    assert W * x() + U * hidden(t - 1) + 1 == sp.MatAdd(W * x(), U * hidden(t - 1), ones).doit()
    assert 1 + W * x() == W * x() + ones
    assert W * x() - sp.Rational(1, 2) == W * x() + sp.Rational(-1, 2) * ones
    assert 2 - W * x() == 2 * ones - W * x()
    assert sp.HadamardProduct(hidden(), x()) + 1 == sp.HadamardProduct(hidden(), x()) + ones
    model = load(spec("plus_one"))
    assert r"\tanh\left(\mathbf{W} \mathbf{x}_{t} + \mathbf{U} \mathbf{h}_{t-1} + \mathbf{1}\right)" in document(
        model, "md"
    )
    module = load_module(model, from_zoo=False)
    instance = problem(module, steps=3, batch=2, seed=8)
    outputs, cache = module.forward(instance.params, instance.xs, **instance.initial)
    p = instance.params
    expected = np.tanh(instance.xs[0] @ p["W"].T + instance.initial["h0"] @ p["U"].T + 1)
    np.testing.assert_allclose(cache["h"][1], expected, rtol=1e-14)


def test_sympy_outside_the_model_language_is_unchanged():
    """Only a column vector that holds a sequence value or an elementwise function takes a scalar."""
    h = sizes("h")
    with pytest.raises(TypeError, match="Mix of Matrix and Scalar"):
        sp.MatrixSymbol("v", 3, 1) + 1
    with pytest.raises(TypeError, match="Mix of Matrix and Scalar"):
        matrix("W", h, h) + 1


A_PARAMETER_PLUS_ONE = textwrap.dedent(
    """
    from bptt.derive.model import Model, matrix, sequence, sizes, vector
    from bptt.derive.nodes import SquaredError, t, tanh


    def cell():
        d, h, q = sizes("d h q")
        x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
        W, b, V = matrix("W", h, d), vector("b", h), matrix("V", q, h)
        s, y = sequence("s", q, "output"), sequence("y", q, "target")
        return Model(
            name="cell", title="b + 1 first", source="a test", sizes=(d, h, q), params=(W, b, V), inputs=(x,),
            steps=((hidden, tanh(b + 1 + W * x() + hidden(t - 1))),), outputs=((s, V * hidden()),),
            loss=SquaredError(s(), y()),
        )
    """
)


def test_a_scalar_plus_a_parameter_alone_says_how_to_write_it(tmp_path):
    """b + 1 is summed before the tool sees a sequence value: one line that says how to write it."""
    path = tmp_path / "cell.py"
    path.write_text(A_PARAMETER_PLUS_ONE)
    with pytest.raises(ModelError, match=r"cell\(\) failed: TypeError: .* W \* x\(\) \+ b \+ 1; .*OneMatrix"):
        load(f"{path}:cell")
