"""Issue 25, item 7: a cell the tool refuses is one line, exit 2, naming the model, the backend being generated and
the equation in the user's notation (W^T, not Tangent(W).T; a matrix of ones, not "the factor 1"). Issue 28: the
cells it refused for a transpose, a sum of parameters, a matrix of ones or an elementwise power generate in every
backend; `bptt latex` and `bptt codegen` refuse the others with the same line."""

import pytest

from bptt.app.cli import main

CELLS = """
import sympy as sp
from sympy.matrices.expressions.special import OneMatrix
from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import SquaredError, t, tanh

d, h, q = sizes("d h q")


def _cell(name, rhs_of):
    W, U, V = matrix("W", h, h), matrix("U", h, d), matrix("V", q, h)
    x, hid = sequence("x", d, "input"), sequence("h", h, "state")
    o, y = sequence("o", q, "output"), sequence("y", q, "target")
    return Model(name=name, title=name, source="tests", sizes=(d, h, q), params=(W, U, V), inputs=(x,),
                 steps=((hid, rhs_of(W, U, x, hid)),), outputs=((o, V * hid()),), loss=SquaredError(o(), y()))


def transposed():
    return _cell("transposed", lambda W, U, x, hid: W.T * hid(t - 1) + U * x())


def antisymmetric():
    return _cell("antisymmetric", lambda W, U, x, hid: tanh((W - W.T) * hid(t - 1) + U * x()))


def ones():
    return _cell("ones", lambda W, U, x, hid: tanh(OneMatrix(h, h) * hid(t - 1) + U * x()))


def power():
    return _cell("power", lambda W, U, x, hid: sp.HadamardPower(1 + W * hid(t - 1) + U * x(), sp.Rational(-1, 2)))


def damped():
    return _cell("damped", lambda W, U, x, hid: tanh((W - W.T - sp.Identity(h) / 4) * hid(t - 1) + U * x()))


def outer():
    return _cell("outer", lambda W, U, x, hid: tanh(hid(t - 1) * hid(t - 1).T * hid(t - 1) + U * x()))


def squared():
    return _cell("squared", lambda W, U, x, hid: tanh(W**2 * hid(t - 1) + U * x()))


def irrational():
    return _cell("irrational", lambda W, U, x, hid: sp.HadamardPower(1 + W * hid(t - 1) + U * x(), sp.sqrt(2)))
"""

FORBIDDEN = ("NumPy form", "Tangent", "Diag", "Apply", "HadamardPower", "MatAdd", "MatMul", "the factor 1", "SeqAt")

GENERATED = ("transposed", "antisymmetric", "damped", "ones", "power")
FACTORS = (
    "(a factor is a parameter, a block of one, a parameter's transpose, the identity, ones, "
    "and their sums and products)"
)
# (cell, what the message says after "model 'cell' (<backend> backend), in ")
EXPECTED = {
    "outer": "h_t = tanh(U x_t + h_{t-1} h_{t-1}^T h_{t-1}): a product by h_{t-1} has no adjoint rule yet " + FACTORS,
    "squared": "h_t = tanh(U x_t + W^2 h_{t-1}): a product by a matrix power W^2 has no adjoint rule yet " + FACTORS,
    "irrational": "h_t = (1 + U x_t + W h_{t-1})^(sqrt(2)): "
    "an elementwise power must have a rational exponent, not sqrt(2)",
}
TITLES = {"numpy": "NumPy", "torch": "torch", "jax": "JAX"}


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    path = tmp_path_factory.mktemp("refused") / "refused.py"
    path.write_text(CELLS, encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("cell", sorted(EXPECTED))
def test_codegen_refuses_in_one_line_naming_model_backend_and_equation(cells, cell, backend, tmp_path, capsys):
    status = main(["codegen", f"{cells}:{cell}", "--backend", backend, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert err == f"bptt codegen: error: model '{cell}' ({TITLES[backend]} backend), in {EXPECTED[cell]}\n"
    assert not any(word in err for word in FORBIDDEN), err
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize("cell", sorted(EXPECTED))
def test_latex_refuses_with_the_line_codegen_refuses_with(cells, cell, capsys):
    """The document has no backend: the model and the equation, and the reason, in the user's notation."""
    status = main(["latex", f"{cells}:{cell}"])
    err = capsys.readouterr().err
    assert status == 2
    assert err == f"bptt latex: error: model '{cell}', in {EXPECTED[cell]}\n"


@pytest.mark.parametrize("cell", GENERATED)
def test_transposes_sums_ones_and_powers_generate_in_every_backend(cells, cell, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["codegen", f"{cells}:{cell}", "--backend", "all", "--out", str(out)]) == 0, capsys.readouterr().err
    assert sorted(path.name for path in out.iterdir()) == sorted(f"{cell}{end}.py" for end in ("", "_jax", "_torch"))
