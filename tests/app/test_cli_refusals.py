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


SLICES = """
from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import SquaredError, t, tanh

d, h, q = sizes("d h q")


def _cell(rhs_of):
    W, U, V = matrix("W", 2 * h, h), matrix("U", h, d), matrix("V", q, h)
    x, hid, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", 2 * h, "intermediate")
    o, y = sequence("o", q, "output"), sequence("y", q, "target")
    return Model(name="sliced", title="sliced", source="tests", sizes=(d, h, q), params=(W, U, V), inputs=(x,),
                 steps=((a, W * hid(t - 1)), (hid, tanh(rhs_of(a, U, x)))), outputs=((o, V * hid()),),
                 loss=SquaredError(o(), y()))


def beyond():
    return _cell(lambda a, U, x: a()[h:3 * h, :] + U * x())


def empty():
    return _cell(lambda a, U, x: a()[h:h, :] + U * x())


def reversed_():
    return _cell(lambda a, U, x: a()[2 * h:h, :] + U * x())


def block():
    return _cell(lambda a, U, x: a()[:h, :] + U[h:2 * h, :] * x())
"""
ROWS_OF_A = "a slice takes consecutive rows i:j with 0 <= i < j <= 2*h"
# (cell, what the message says after "<file>:<cell>(): ")
SLICED = {
    "beyond": "the slice a_t[h:3*h, :] ends past the 2*h rows of a_t: " + ROWS_OF_A,
    "empty": "the slice a_t[h:h, :] takes none of the 2*h rows of a_t: " + ROWS_OF_A,
    "reversed_": "the slice a_t[2*h:h, :] takes none of the 2*h rows of a_t (it ends before it starts): " + ROWS_OF_A,
    "block": "the slice U[h:2*h, :] ends past the h rows of U: "
    "a slice takes consecutive rows i:j with 0 <= i < j <= h and columns k:l with 0 <= k < l <= d",
}


@pytest.mark.parametrize("command", [["check"], ["latex"], ["codegen", "--backend", "all"]])
@pytest.mark.parametrize("cell", sorted(SLICED))
def test_a_slice_out_of_range_empty_or_reversed_is_one_line_naming_it_as_written(cell, command, tmp_path, capsys):
    """SymPy refuses such a slice with a bare IndexError as the user's function makes it; the line names the
    slice, the value's rows and what a slice takes, where it said `failed: IndexError:` and nothing more."""
    path = tmp_path / "sliced.py"
    path.write_text(SLICES, encoding="utf-8")
    status = main([command[0], f"{path}:{cell}", *command[1:]])
    err = capsys.readouterr().err
    assert status == 2 and err == f"bptt {command[0]}: error: {path}:{cell}(): {SLICED[cell]}\n", err
