"""Issue 28: mean, sum, layer_norm and rms_norm in the model language (bptt.derive.nodes). A reduction is a 1 x 1
value that broadcasts in a sum as a scalar does; a norm's parts are named intermediates of the model (mu_a,
sigma_a, a_hat), so the derivation shows them and the backward reads the forward's sigma and a_hat; eps is a
positive rational or 0, anything else one line naming it (exit 2 from the CLI)."""

import pathlib

import numpy as np
import pytest
import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, layer_norm, mean, rms_norm, sum, t, tanh
from bptt.derive.norms import Norm, NormError
from bptt.derive.reductions import ReductionError
from bptt.derive.text import text
from bptt.tests.support.cli import assert_user_error, bptt
from bptt.tests.support.norm_cells import norm_in_gain

d, h, q = sizes("d h q")
W, U, V = matrix("W", h, h), matrix("U", h, d), matrix("V", q, h)
x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
s, y = sequence("s", q, "output"), sequence("y", q, "target")


def cell(rhs, params=(), first=None):
    """h_t = rhs after the step first (default a_t = W h_{t-1} + U x_t), a linear head and the squared error."""
    return Model(
        name="cell",
        title="a cell",
        source="a test",
        sizes=(d, h, q),
        params=(W, U, V, *params),
        inputs=(x,),
        steps=(first or (a, W * hidden(t - 1) + U * x()), (hidden, rhs)),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )


def test_a_reduction_is_one_by_one_and_broadcasts_in_a_sum_either_way():
    assert mean(a()).shape == sum(a()).shape == (1, 1)
    assert (a() - mean(a())).shape == (mean(a()) - a()).shape == (h, 1)
    assert (mean(a()) + 1).shape == (1, 1)
    assert text(a() - mean(a())) == "a_t - 1 mean(a_t)"


def test_a_layer_norm_is_named_in_parts_and_its_sigma_read_by_the_backward():
    gain, bias = vector("gamma", h), vector("beta", h)
    model = cell(tanh(layer_norm(a(), gain, bias, eps=sp.Rational(1, 10))), (gain, bias))
    assert [seq.name for seq, _ in model.steps] == ["a", "mu_a", "sigma_a", "a_hat", "h"]
    assert [seq.rows for seq, _ in model.steps] == [h, 1, 1, h, h]
    steps = {seq.name: text(rhs) for seq, rhs in model.steps}
    assert steps["sigma_a"] == "mean(1/10 1 + (a_t - 1 mu_a_t)^2)^(1/2)"
    assert steps["h"] == "tanh(beta + gamma * a_hat_t)"
    derivation = derive(model, named="all")
    into_a = text(sp.MatAdd(*(c.value for c in derivation.intermediates[model.steps[0][0]])))
    assert "sigma_a_t^(-1)" in into_a and "mean" not in into_a, into_a


def test_an_rms_norm_of_an_expression_names_its_input_and_has_no_mean_of_the_centre():
    model = cell(rms_norm(W * hidden(t - 1)))
    assert [seq.name for seq, _ in model.steps] == ["a", "h_in", "sigma_h_in", "h_in_hat", "h"]
    assert text(model.steps[2][1]) == "mean(h_in_t^2)^(1/2)"


def test_a_float_eps_is_its_decimal_rational():
    assert layer_norm(a(), eps=1e-5).eps == sp.Rational(1, 100000)
    assert layer_norm(a(), eps=np.float32(1e-5)).eps == sp.Rational(1, 100000)  # NumPy's, as its digits say
    assert layer_norm(a(), eps=np.float64(0.1)).eps == sp.Rational(1, 10)


@pytest.mark.parametrize("eps", [-1, "abc", float("nan"), float("inf"), True, sp.Symbol("e"), sp.sqrt(2)])
def test_an_eps_that_is_not_a_positive_rational_or_0_is_refused_by_name(eps):
    with pytest.raises(NormError, match=r"^layer_norm: eps must be a positive rational or 0, not "):
        layer_norm(a(), eps=eps)


def test_a_gain_of_other_rows_and_a_reduction_of_a_matrix_are_refused_in_one_line():
    with pytest.raises(NormError, match=r"^rms_norm: the gain must be a column of the input's h rows, not shape q x 1"):
        rms_norm(a(), vector("g", q))
    with pytest.raises(ReductionError, match=r"^mean\(v\) reduces a column vector, not shape h x h"):
        mean(W)


def test_the_cli_refuses_a_negative_eps_with_one_line(tmp_path):
    source = pathlib.Path(__file__).parents[1] / "support" / "norm_cells.py"
    path = tmp_path / "cells.py"
    path.write_text(source.read_text().replace("eps=Rational(1, 100)", "eps=-1"))
    assert_user_error(bptt("latex", f"{path}:layer_norm_elman"), "eps must be a positive rational or 0, not -1")


def test_a_one_by_one_value_scales_a_column_as_a_scalar_does():
    """sigma * v, v * sigma and v / sigma are elementwise products with 1 sigma (1 sigma^(-1) for the quotient)."""
    sigma = mean(a()) + 1
    assert text(a() / sigma) == "a_t * 1 (1 + mean(a_t))^(-1)"
    assert text(sigma * a()) == text(a() * sigma) == "a_t * 1 (1 + mean(a_t))"
    assert (a() / sigma).shape == (h, 1)


def test_a_one_row_value_divided_by_a_one_by_one_value_is_an_elementwise_quotient():
    """v / sigma of a v of one row is v * sigma^(-1), as for n rows, not SymPy's matrix product v sigma^(-1) (the
    same number, but a product by v, which no adjoint rule takes): so a norm over one unit derives."""
    one = sequence("b", 1, "intermediate")
    sigma = mean(one()) + 1
    assert one() / sigma == sp.HadamardProduct(one(), sp.HadamardPower(sigma, -1))
    assert text(one() / sigma) == "b_t * (1 + mean(b_t))^(-1)"


@pytest.mark.parametrize("norm", [layer_norm, rms_norm])
def test_a_norm_over_one_unit_is_derived(norm):
    """b_t, the norm of w x_t of one row (w a 1 x d parameter): its b_in_hat is an elementwise quotient, and the
    derivation reaches w through it (the oracle proves the code: tests/oracle/test_norm_cells.py:one_unit_norms)."""
    w, v, one = matrix("w", 1, d), vector("v", h), sequence("b", 1, "intermediate")
    normed = (one, norm(w * x(), eps=sp.Rational(1, 10**5)))
    model = cell(tanh(W * hidden(t - 1) + v * one()), (w, v), first=normed)
    hat = next(rhs for seq, rhs in model.steps if seq.name == "b_in_hat")
    assert isinstance(hat, sp.HadamardProduct), text(hat)
    assert derive(model).param_gradient(w).shape == (1, d)


def test_a_norm_of_a_norm_names_the_parts_of_both():
    model = cell(tanh(rms_norm(layer_norm(a()) + a())))
    names = [seq.name for seq, _ in model.steps]
    assert names == ["a", "mu_a", "sigma_a", "a_hat", "h_in", "sigma_h_in", "h_in_hat", "h"], names
    assert text(model.steps[4][1]) == "a_hat_t + a_t"


def test_a_norm_inside_a_gain_or_a_bias_is_named_in_parts_too():
    """The model's steps hold no Norm: those in the gain and the bias are expanded before the outer norm's parts."""
    model = norm_in_gain()
    assert not any(rhs.has(Norm) for _, rhs in model.steps), [text(rhs) for _, rhs in model.steps]
    names = [seq.name for seq, _ in model.steps]
    assert names == [
        "a", "h_gain_in", "sigma_h_gain_in", "h_gain_in_hat", "mu_a", "sigma_a", "a_hat", "mu_a2", "sigma_a2",
        "a_hat2", "h",
    ], names  # fmt: skip
    assert text(model.steps[-1][1]) == "tanh(sigmoid(h_gain_in_hat_t) * a_hat2_t + a_hat_t)"
