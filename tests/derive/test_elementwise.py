"""Every elementwise function in the registry: its derivative against sympy.diff of
its scalar form, every backend's code of it against the scalar form, and cells built with each
(and with a function a user registers) checked end to end."""

import importlib
import json
import pathlib
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sympy as sp

from bptt.app.verify.check import check, load_module
from bptt.codegen.jax.printer import JAX_FUNCTIONS
from bptt.codegen.printing.function_code import SUM, Term
from bptt.codegen.printing.functions import NUMPY_FUNCTIONS
from bptt.codegen.torch.functions import TORCH_FUNCTIONS
from bptt.derive.elementwise import FUNCTIONS, Apply, derivative
from bptt.derive.explicit import explicit
from bptt.derive.models import load
from bptt.documents.latex import latex

ENTRIES = sorted(FUNCTIONS)
DIFFERENTIABLE = [name for name in ENTRIES if FUNCTIONS[name].derivative is not None]  # slopes have none
SHIPPED = [
    "elu",
    "exp",
    "gelu",
    "identity",
    "leaky_relu",
    "log",
    "relu",
    "sigmoid",
    "silu",
    "softplus",
    "softsign",
    "tanh",
]


def _points(seed, n=6, positive=False):
    """Random nonzero rationals, away from the kinks of relu and friends (positive for log)."""
    rng = random.Random(seed)
    sign = (lambda: 1) if positive else (lambda: rng.choice([-1, 1]))
    return [sp.Rational(sign() * rng.randint(1, 40), rng.randint(1, 9)) for _ in range(n)]


def test_the_issue_s_activations_are_shipped_and_importable_from_nodes():
    import bptt.derive.nodes as nodes

    assert set(SHIPPED) <= set(FUNCTIONS)
    for name in SHIPPED:
        assert getattr(nodes, name)(sp.MatrixSymbol("a", 2, 1)) == Apply(name, sp.MatrixSymbol("a", 2, 1))


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_derivative_equals_sympy_diff_of_the_scalar_function(name):
    assert_derivative_is_exact(name)


def assert_derivative_is_exact(name):
    entry = FUNCTIONS[name]
    z = sp.Symbol("z", real=True)
    exact = sp.diff(entry.scalar(z), z)
    values = _points(seed=len(name), positive=name == "log")
    x = sp.MatrixSymbol("x", len(values), 1)
    y = sp.MatrixSymbol("y", len(values), 1)
    column = sp.ImmutableMatrix(values)
    env = {x: column, y: column.applyfunc(entry.scalar)}
    derived = explicit(derivative(Apply(name, x), y).xreplace(env))
    for value, got in zip(values, derived, strict=True):
        want = exact.subs(z, value)
        assert abs(sp.N(got - want, 40)) < sp.Float(10) ** -30, (name, value, got, want)


TABLES = {"numpy": NUMPY_FUNCTIONS, "torch": TORCH_FUNCTIONS, "jax": JAX_FUNCTIONS}


def test_every_registry_function_has_code_in_every_backend():
    """The registry as the tool ships it (a fresh process: tests register functions of their own)."""
    listed = "import json; from bptt.derive.elementwise import FUNCTIONS; print(json.dumps(sorted(FUNCTIONS)))"
    names = json.loads(subprocess.run([sys.executable, "-c", listed], capture_output=True, check=True).stdout)
    assert set(SHIPPED) <= set(names)
    for backend, table in TABLES.items():
        assert [name for name in names if FUNCTIONS[name].kind not in table] == [], backend


def evaluated(name, backend, values):
    """The backend's code of the function on values, read through a compound argument (2 * a - a),
    so that an operand the code leaves unparenthesised computes something else."""
    runtime = importlib.import_module(f"bptt.runtime.{backend}")  # the framework and the helpers a module calls
    scope = {**vars(importlib.import_module("bptt.runtime.common")), **vars(runtime)}
    scope["a"] = values
    code = TABLES[backend].code(FUNCTIONS[name], Term("2 * a - a", SUM))
    return eval(code.text, scope)


def assert_code_computes_the_function(name, dtype, backend="numpy"):
    entry = FUNCTIONS[name]
    points = np.array([float(v) for v in _points(seed=7, positive=name == "log")], dtype)
    values = {
        "numpy": lambda: points,
        "torch": lambda: _torch().from_numpy(points),
        "jax": lambda: _jnp().asarray(points),
    }
    got = np.asarray(evaluated(name, backend, values[backend]()))
    want = np.array([float(entry.scalar(sp.Float(float(v), 30))) for v in points])
    assert got.dtype == dtype, (name, backend)
    eps = np.finfo(dtype).eps  # relative, and absolute for outputs near 0 (sigmoid goes through tanh)
    assert np.allclose(got, want, rtol=4 * eps, atol=4 * eps), (name, backend, got, want)


def _torch():
    return pytest.importorskip("torch")


def _jnp():
    return pytest.importorskip("jax.numpy")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ENTRIES)
def test_numpy_code_computes_the_function_and_keeps_the_dtype(name, dtype):
    assert_code_computes_the_function(name, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ENTRIES)
def test_torch_code_computes_the_function_and_keeps_the_dtype(name, dtype):
    assert_code_computes_the_function(name, dtype, "torch")


@pytest.mark.parametrize("name", ENTRIES)
def test_jax_code_computes_the_function_in_float32(name):
    """float32 only: float64 needs jax_enable_x64, a setting this test leaves alone."""
    assert_code_computes_the_function(name, np.float32, "jax")


def test_latex_names_the_functions():
    a = sp.MatrixSymbol("a", 3, 1)
    assert latex(Apply("relu", a)) == r"\operatorname{ReLU}\left(\mathbf{a}\right)"
    assert latex(Apply("sigmoid", a)) == r"\sigma\left(\mathbf{a}\right)"


CELL = textwrap.dedent(
    """
    import sympy as sp
    from bptt.codegen.printing.functions import NUMPY_FUNCTIONS
    from bptt.derive.elementwise import Elementwise, register
    from bptt.derive.model import Model, matrix, sequence, sizes, vector
    from bptt.derive.nodes import Apply, SquaredError, t

    # A function of the user's own: f(x) = x^3 / 3 + x, f'(x) = x^2 + 1.
    cube = register(
        Elementwise(
            name="cubic",
            scalar=lambda z: z**3 / 3 + z,
            derivative=lambda x, y: sp.HadamardPower(x, 2) + sp.OneMatrix(*x.shape),
            latex=r"\\operatorname{cubic}",
        )
    )
    NUMPY_FUNCTIONS.register("cubic", lambda xp, x: x**3 / 3 + x)


    def cell(function):
        d, h, q = sizes("d h q")
        W, U, V, b = matrix("W", h, h), matrix("U", h, d), matrix("V", q, h), vector("b", h)
        x, a, hidden = sequence("x", d, "input"), sequence("a", h, "intermediate"), sequence("h", h, "state")
        o, y = sequence("o", q, "output"), sequence("y", q, "target")
        # the activation reads a compound argument, so its code must bind correctly
        return Model(
            name=f"{function}-rnn",
            title=f"An RNN with {function}",
            source="a test",
            sizes=(d, h, q),
            params=(W, U, V, b),
            inputs=(x,),
            steps=((a, W * hidden(t - 1) + U * x()), (hidden, Apply(function, 0.5 * a() + b))),
            outputs=((o, V * hidden()),),
            loss=SquaredError(o(), y()),
        )
    """
)

CELL_FUNCTIONS = ["relu", "leaky_relu", "elu", "softplus", "softsign", "silu", "gelu", "exp", "identity", "cubic"]


@pytest.fixture(scope="module")
def cell_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cells") / "cells.py"
    body = "".join(f"\n\ndef {name}_rnn():\n    return cell({name!r})\n" for name in CELL_FUNCTIONS + ["mish"])
    path.write_text(CELL + body, encoding="utf-8")
    return path


@pytest.mark.parametrize("function", CELL_FUNCTIONS)
def test_a_cell_with_the_function_derives_generates_and_checks(cell_file, function):
    module = load_module(load(f"{cell_file}:{function}_rnn"), from_zoo=False)
    rows = check(module, steps=6, batch=2, seed=3)
    assert {row.name for row in rows} == set(module.PARAMS) | set(module.STATES)
    assert all(row.ok for row in rows), [(row.name, row.error) for row in rows]
    rng = np.random.default_rng(1)
    sizes = {"d": 3, "h": 4, "q": 2}
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, 5, 2, **sizes)
    _, grads = module.loss_and_grads(params, xs, ys)
    _, forward = module.forward_mode_grads(params, xs, ys)
    for key, value in grads.items():
        assert np.abs(forward[key] - value).max() <= 1e-10 * np.abs(value).max(), key


def test_the_readme_example_registers_a_function_that_every_layer_knows(cell_file, monkeypatch):
    """The README's mish, registered as the README says: exact derivative, right code, a cell that checks."""
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Elementwise functions") :]
    example = section[section.index("```python\n") + 10 : section.index("```\n", section.index("```python"))]
    for name in ("mish", "mish'"):
        monkeypatch.setitem(FUNCTIONS, name, None)  # removed again after the test
        monkeypatch.setitem(NUMPY_FUNCTIONS.entries, name, None)
    exec(compile(example, "README.md", "exec"), {})
    assert_derivative_is_exact("mish")
    for dtype in (np.float32, np.float64):
        assert_code_computes_the_function("mish", dtype)
        assert_code_computes_the_function("mish'", dtype)
    assert_code_computes_the_function("mish", np.float32, "jax")  # NumPy's code, on jnp
    module = load_module(load(f"{cell_file}:mish_rnn"), from_zoo=False)
    assert all(row.ok for row in check(module, steps=6, batch=2, seed=5))


@pytest.mark.parametrize("name", [n for n in DIFFERENTIABLE if FUNCTIONS[n].slope_bound is not None])
def test_slope_bound_bounds_the_derivative(name):
    """sup |f'| <= slope_bound on a fine grid (the bound of the gradient-flow analysis)."""
    z = sp.Symbol("z", real=True)
    dirac_away_from_0 = {"DiracDelta": lambda v: 0.0}  # the grid skips 0, where step and relu have kinks
    slope = sp.lambdify(z, sp.diff(FUNCTIONS[name].scalar(z), z), [dirac_away_from_0, "mpmath"])
    grid = [k / 50 for k in range(-500, 501) if k]
    assert max(abs(float(slope(v))) for v in grid) <= float(FUNCTIONS[name].slope_bound) + 1e-12


def test_a_function_without_a_backend_s_code_is_refused_in_one_line(cell_file, tmp_path, capsys):
    """cubic has NumPy code but no torch code: the torch module is refused, naming the table to add it to,
    and nothing is written."""
    from bptt.app.cli import main

    status = main(["codegen", f"{cell_file}:cubic_rnn", "--backend", "torch", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and list(tmp_path.iterdir()) == []
    assert (
        err.count("\n") == 1
        and "(torch backend)" in err
        and "'cubic' has no code" in err
        and "TORCH_FUNCTIONS.register('cubic'" in err
    )


def test_a_function_registered_again_is_derived_again():
    """backprop is memoized: after a function is registered again under its name (register replaces), an
    equation reading it is backpropagated with the new derivative, not the remembered one."""
    from bptt.derive.adjoint import backprop
    from bptt.derive.elementwise import Elementwise, register

    x, g = sp.MatrixSymbol("x", 3, 1), sp.MatrixSymbol("g", 3, 1)
    slopes = {}
    try:
        for slope in (lambda x, y: x, lambda x, y: y):  # f'(x) = x, then f'(x) = f(x)
            f = register(Elementwise("twice_registered", lambda z: z, slope, r"\operatorname{f}"))
            slopes[len(slopes)] = backprop(f(x), g)[x]
    finally:
        FUNCTIONS.pop("twice_registered")
    assert slopes[0] != slopes[1] and slopes[1].has(Apply("twice_registered", x)), slopes
