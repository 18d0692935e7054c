"""bptt analyze for a cell whose step Jacobian has no closed form (lstm-layernorm: a norm's adjoint is not a matrix
times the state's): the step Jacobians measured on the module agree with the derived ones where those exist and
with the module's own backward pass where they do not, and a stacked recurrent matrix (W_h, 4h x h) is scaled
block by block to the radius."""

from dataclasses import replace

import numpy as np
import pytest

from bptt.app.analysis.analyze import analyze
from bptt.app.analysis.jacobians import measured_jacobians, state_gradients, step_jacobians
from bptt.app.analysis.regime import block_names
from bptt.app.analysis.runs import setup
from bptt.derive.closed_form import NoClosedForm
from bptt.derive.flow import gradient_flow
from bptt.derive.models import load

STEPS = 8
AGREE = 1e-8  # the measured Jacobians' relative error (about 1e-10 seen; central differences, extrapolated)


def runs(name):
    """Each run of a short analysis of a zoo model: (its Setup with the regime, the parameters at the radius)."""
    found, _ = setup(load(name), STEPS, 0, (0.5, 1.5), None)
    for scale in (found.regime.scale, 1.0):
        each = replace(found, regime=replace(found.regime, scale=scale))
        for radius in found.radii:
            yield each, each.params(radius)


def measured(found, params):
    cache = found.cache(params)
    return measured_jacobians(found.flow, found.module, params, found.xs, found.ys, cache), cache


def relative(found, expected):
    return float(np.linalg.norm(found - expected) / np.linalg.norm(expected))


@pytest.mark.parametrize("name", ["elman", "gru", "lstm"])
def test_measured_step_jacobians_equal_the_derived_ones(name):
    for found, params in runs(name):
        jacobians, cache = measured(found, params)
        derived = step_jacobians(found.flow, found.module, params, found.xs, cache, found.sizes)
        assert max(map(relative, jacobians, derived)) < AGREE


def test_the_layer_norm_lstm_has_no_closed_form_so_its_flow_is_measured():
    with pytest.raises(NoClosedForm):
        gradient_flow(load("lstm-layernorm"))
    flow = gradient_flow(load("lstm-layernorm"), measured=True)
    assert flow.measured and [s.name for s in flow.states] == ["c", "h"] and flow.bound is None
    assert not gradient_flow(load("lstm"), measured=True).measured


def test_the_products_of_measured_jacobians_carry_the_modules_backward_gradient():
    """dL_T/ds_t = (J_{T-1} ... J_{t+1})^T dL_T/ds_{T-1}, each side from the module: its backward pass from the
    states at t, and the measured step Jacobians; in both regimes, at both radii."""
    for found, params in runs("lstm-layernorm"):
        jacobians, _ = measured(found, params)
        gradients = state_gradients(found.module, params, found.xs, found.ys, found.flow.states)
        carried = gradients[-1]
        for step in range(STEPS - 2, -1, -1):
            carried = jacobians[step].T @ carried
            assert relative(carried, gradients[step]) < AGREE, step


def test_each_square_block_of_a_stacked_recurrent_matrix_is_scaled_to_the_radius():
    found, _ = setup(load("lstm-layernorm"), STEPS, 0, (0.5, 1.5), None)
    (recurrent,) = found.recurrent
    for radius in found.radii:
        value = found.params(radius)[recurrent.name]
        blocks = block_names(recurrent.name, value)
        assert list(blocks) == [f"W_h[{start}:{start + 8}]" for start in (0, 8, 16, 24)]
        for rows in blocks.values():
            assert max(abs(np.linalg.eigvals(value[rows]))) == pytest.approx(radius, rel=1e-12)


def test_the_analysis_says_its_jacobians_are_measured_and_lists_each_blocks_eigenvalues():
    analysis = analyze(load("lstm-layernorm"), 4, 0, (0.5, 1.5))
    assert all("measured by differences" in t.title for t in analysis.tables if t.name.startswith("gradient_norms"))
    eigen = analysis.table("eigenvalues")
    assert sorted(set(eigen.column("matrix"))) == sorted(f"W_h[{start}:{start + 8}]" for start in (0, 8, 16, 24))
    assert len(eigen.rows) == 2 * 4 * 8  # two radii, four blocks, eight eigenvalues each
