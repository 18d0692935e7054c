"""Issue 28: the reductions' names (mean, sum) are the registry's, and a user's own of the same name wins. An
elementwise function a user registers as `sum`, with its NumPy code, in a cell that also reduces with sum and
mean (a layer norm's): the NumPy module computes the user's function where the cell applies it and the reductions
where it reduces, as the oracle does; a backend without the user's code refuses it in one line (it never prints the
reduction's code in its place). Parameters named sum and mean: the NumPy and torch modules agree with the oracle."""

import textwrap

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

from test_oracle import random_problem
from test_oracle_cells import agree_in_every_truncation, generate

from bptt.app.cli import main
from bptt.codegen.printing.functions import NUMPY_FUNCTIONS
from bptt.derive.elementwise import FUNCTIONS
from bptt.derive.models import load
from bptt.tests.support.oracle import compare, run

CELLS = textwrap.dedent(
    """
    import sympy as sp
    from sympy import Rational
    from bptt.codegen.printing.functions import NUMPY_FUNCTIONS
    from bptt.derive import nodes
    from bptt.derive.elementwise import Elementwise, register
    from bptt.derive.model import matrix, sequence, sizes, vector
    from bptt.derive.nodes import layer_norm, mean, t, tanh
    from bptt.tests.support.norm_cells import _cell

    # the user's own elementwise function named as a reduction: sum(x) = x^3 / 3 + x, sum'(x) = x^2 + 1
    user_sum = register(
        Elementwise(
            "sum",
            lambda z: z**3 / 3 + z,
            lambda x, y: sp.HadamardPower(x, 2) + sp.OneMatrix(*x.shape),
            r"\\operatorname{sum}",
        )
    )
    NUMPY_FUNCTIONS.register("sum", lambda xp, x: x**3 / 3 + x)


    def parts():
        d, h, q = sizes("d h q")
        x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
        return (d, h, q), x, hidden, a, (matrix("W", h, h), matrix("U", h, d))


    def users_sum():
        sizes_, x, hidden, a, (W, U) = parts()
        b = vector("b", sizes_[1])
        steps = (
            (a, W * hidden(t - 1) + U * x() + b),
            (hidden, tanh(user_sum(layer_norm(a(), eps=Rational(1, 100)) - nodes.sum(a()) / 4))),
        )
        return _cell("users-sum", "a user's sum", (W, U, b), x, hidden, steps, sizes_)


    def named_sum_and_mean():
        sizes_, x, hidden, a, (W, U) = parts()
        bias, gain = vector("sum", sizes_[1]), vector("mean", sizes_[1])
        steps = (
            (a, W * hidden(t - 1) + U * x() + bias),
            (hidden, tanh(layer_norm(a(), gain, bias) - mean(a()) + nodes.sum(a()) / 4)),
        )
        return _cell("named-sum-and-mean", "parameters sum and mean", (W, U, bias, gain), x, hidden, steps, sizes_)
    """
)


@pytest.fixture
def cells(tmp_path, monkeypatch):
    """The cells' file; the user's `sum` registered while the test runs, removed after it."""
    monkeypatch.setitem(FUNCTIONS, "sum", None)
    monkeypatch.setitem(NUMPY_FUNCTIONS.entries, "sum", None)
    path = tmp_path / "cells.py"
    path.write_text(CELLS, encoding="utf-8")
    return path


def test_a_users_function_named_sum_is_the_users_and_the_reductions_are_the_registrys(cells, tmp_path, capsys):
    model = load(f"{cells}:users_sum")
    agree_in_every_truncation(model, "numpy")
    status = main(["codegen", f"{cells}:users_sum", "--backend", "torch", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert "'sum' has no code" in err and "TORCH_FUNCTIONS.register('sum'" in err, err


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_parameters_named_sum_and_mean_beside_the_reductions(cells, backend):
    """With the user's function sum registered too (the file's): its NumPy code never stands in for the reduction's."""
    model = load(f"{cells}:named_sum_and_mean")
    problem = random_problem(model, seed=4)
    compare(generate(model, backend), model, *problem, None, expected=run(model, *problem, None))
