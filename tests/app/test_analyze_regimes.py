"""The regimes bptt analyze measures in really show what its plots claim: the cell kept nearly linear (its input
weights and biases scaled by the largest power of ten that keeps every state within 0.01 of its value at zero
input), Elman's and the LSTM's gradients vanish below and explode above their critical radius, at the rate the
linearised step gives, and the LSTM's carousel keeps sigma(b)^(T-t) of the gradient with its forget-gate bias b."""

import math

import numpy as np
import pytest

from bptt.app.analysis.analyze import RADII, analyze, deviation, setup, table_names
from bptt.app.analysis.jacobians import step_jacobians, step_values
from bptt.app.analysis.regime import CAROUSEL_BIASES, TARGET
from bptt.derive.models import load

STEPS = 40


def by_radius(table, column, radius):
    """The column's values at one radius, in order of T - t = 1, 2, ..."""
    return np.array([row[table.columns.index(column)] for row in table.rows if row[0] == radius])


@pytest.fixture(scope="module")
def elman():
    return analyze(load("elman"), STEPS)


@pytest.fixture(scope="module")
def lstm():
    return analyze(load("lstm"), STEPS)


@pytest.mark.parametrize("name", ["elman", "lstm", "gru"])
def test_the_scale_is_the_largest_power_of_ten_that_keeps_the_states_near_their_zero_input_values(name):
    found, _ = setup(load(name), STEPS, 0, RADII, None)
    scale = found.regime.scale
    assert scale == 10.0 ** round(math.log10(scale)) and scale < 1
    measure = deviation(found, RADII)
    assert measure(scale) <= TARGET < measure(10 * scale)


def test_elmans_tanh_stays_unsaturated_and_the_linear_cell_is_not_scaled():
    """tanh' = 1 - tanh^2 >= 0.9998 at every step and radius; the linear cell has nothing to saturate: scale 1."""
    found, _ = setup(load("elman"), STEPS, 0, RADII, None)
    for radius in RADII:
        params = found.params(radius)
        space = step_values(found.flow, found.module, params, found.xs, found.cache(params), found.sizes)
        assert np.min(1 - np.tanh(space["a"][1:]) ** 2) >= 0.9998
    assert analyze(load("linear"), 3).scale == 1.0
    assert analyze(load("elman"), 3, scale=1).scale == 1.0  # given: kept


def test_elman_vanishes_below_radius_one_and_explodes_above_at_the_rate_of_the_radius(elman):
    """Nearly linear, dh_T/dh_t is about W^(T-t): its norm grows per step by the radius, from T - t = 20 to 40."""
    table = elman.table("gradient_norms")
    for radius in RADII:
        product = by_radius(table, "|dh_T/dh_t|", radius)
        rate = (product[39] / product[19]) ** (1 / 20)
        assert rate == pytest.approx(radius, rel=0.02), radius
        assert np.all(product <= by_radius(table, "upper_bound", radius) * (1 + 1e-9))
    assert by_radius(table, "|dh_T/dh_t|", 0.5)[-1] < 1e-9 and by_radius(table, "|dL_T/dh_t|", 0.5)[-1] < 1e-9
    assert 0.1 < by_radius(table, "|dh_T/dh_t|", 1.0).min() and by_radius(table, "|dh_T/dh_t|", 1.0).max() < 10
    assert by_radius(table, "|dh_T/dh_t|", 1.5)[-1] > 1e6 and by_radius(table, "|dL_T/dh_t|", 1.5)[-1] > 1e6
    loose = by_radius(table, "upper_bound", 1.5)[-1] / by_radius(table, "|dh_T/dh_t|", 1.5)[-1]
    assert loose > 1e6 and "the upper bound uses sigma_max(W) = " in table.title


def test_saturated_elman_vanishes_at_every_radius():
    table = analyze(load("elman"), STEPS, scale=1).table("gradient_norms")
    assert all(by_radius(table, "|dh_T/dh_t|", radius)[-1] < 1e-3 for radius in RADII)


def test_lstm_vanishes_at_radius_half_and_explodes_at_one_and_a_half_at_its_linearised_rate(lstm):
    """With the forget gate's biases summing to 1, the cell block decays at 0.5 and grows at 1.5; from T - t = 20
    to 40 its rate per step is the spectral radius of the linearised step Jacobian (at zero input)."""
    table = lstm.table("gradient_norms")
    found, _ = setup(load("lstm"), STEPS, 0, RADII, None)
    for radius, grows in ((0.5, False), (1.0, False), (1.5, True)):
        params = found.params(radius)
        assert np.allclose(params["b_if"], 0.5) and np.allclose(params["b_hf"], 0.5)
        first = step_jacobians(found.flow, found.module, params, found.xs, found.cache(params), found.sizes)[0]
        cell = by_radius(table, "|dc_T/dc_t|", radius)
        rate = (cell[39] / cell[19]) ** (1 / 20)
        assert rate == pytest.approx(max(abs(np.linalg.eigvals(first))), rel=0.02), radius
        assert (rate > 1) == grows and (cell[-1] > 1) == grows
    for column in table.columns[2:]:
        assert by_radius(table, column, 0.5)[-1] < 1e-2, column


def test_the_carousel_keeps_sigma_of_the_bias_per_step(lstm):
    """Nearly linear, f_k = sigma(b) at every step: the carousel's product is sigma(b)^(T-t), for b = 0, 1, 5;
    every path through the cell block is at least as slow to vanish at T - t = 40."""
    table = lstm.table("carousel")
    assert "The constant error carousel through c" in table.title and table.columns[2:4] == ("prod f_k", "|dc_T/dc_t|")
    for bias in CAROUSEL_BIASES:
        rows = [row for row in table.rows if row[0] == bias]
        distances, path = np.array([row[1] for row in rows]), np.array([row[2] for row in rows])
        assert np.allclose(path, (1 / (1 + math.exp(-bias))) ** distances, rtol=1e-3), bias
        assert rows[-1][3] >= rows[-1][2]
    held = [row[2] for row in table.rows if row[0] == 5.0 and row[1] == STEPS][0]
    halved = [row[2] for row in table.rows if row[0] == 0.0 and row[1] == STEPS][0]
    assert held > 0.7 and halved < 1e-11


def test_a_carousel_table_needs_a_gate_with_a_bias():
    """The GRU's h_t = (1 - z) * n + z * h_{t-1} has one (z, biases b_iz + b_hz); the example's (1 - z) has none."""
    assert table_names(load("gru"))[-1] == "carousel" and table_names(load("elman"))[-1] == "clipping"
    assert "carousel" not in table_names(load("examples/gated_rnn.py:gated_rnn"))
    gru = analyze(load("gru"), 3, radii=(0.5,)).table("carousel")
    assert gru.columns[2] == "prod z_k" and {row[0] for row in gru.rows} == set(CAROUSEL_BIASES)
