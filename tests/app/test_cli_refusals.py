"""Issue 25, item 7: a cell the tool refuses is one line, exit 2, naming the model, the backend being generated and
the equation in the user's notation (W^T, not Tangent(W).T; a matrix of ones, not "the factor 1")."""

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
    return _cell("power", lambda W, U, x, hid: sp.HadamardPower(W * hid(t - 1) + U * x(), sp.Rational(-1, 2)))
"""

FORBIDDEN = ("NumPy form", "Tangent", "Diag", "Apply", "HadamardPower", "MatAdd", "MatMul", "the factor 1", "SeqAt")

# (cell, what the message says after "model 'cell' (<backend> backend), in ")
EXPECTED = {
    "transposed": "h_t = U x_t + W^T h_{t-1}: the generated code cannot multiply by the transpose W^T yet",
    "antisymmetric": "h_t = tanh(U x_t + (W - W^T) h_{t-1}): the generated code cannot multiply by the sum W - W^T yet",
    "ones": "h_t = tanh(U x_t + ones(h x h) h_{t-1}): "
    "the generated code cannot multiply by a matrix of ones (h x h) yet",
    "power": "h_t = (U x_t + W h_{t-1})^(-1/2): "
    "an elementwise power (U x_t + W h_{t-1})^(-1/2) has no adjoint rule yet",
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


def test_latex_names_the_model_and_the_equation_of_an_elementwise_power(cells, capsys):
    """The document has no backend: the model and the equation, and the power in the user's notation."""
    status = main(["latex", f"{cells}:power"])
    err = capsys.readouterr().err
    assert status == 2
    assert err == f"bptt latex: error: model 'power', in {EXPECTED['power']}\n"
