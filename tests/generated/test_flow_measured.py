"""Gradient flow, measured: the derived Jacobians evaluated on a generated module's forward pass agree with
finite differences and with the module's backward pass, and the claims of the section hold in numbers."""

import numpy as np
import pytest

from bptt.app.analysis.analyze import alignment, analyze
from bptt.app.analysis.jacobians import state_gradients, state_products, step_jacobians, step_values
from bptt.app.analysis.regime import scaled
from bptt.app.verify.check import load_module
from bptt.derive.models import load
from bptt.tests.support.flow import gradient_flow, sigmoid_cell

MODELS = (
    "linear",
    "elman",
    "elman-onehot",
    "elman-jordan",
    "gru",
    "lstm",
    "lstm-peephole",
    "examples/gated_rnn.py:gated_rnn",
    "tests/support/norm_cells.py:layer_norm_elman",  # a norm's 1 x 1 mean and sigma in the Jacobian
)


def setup(name, steps, seed=1, radius=1.2, sizes=None, model=None):
    """(flow, module, params, xs, ys, cache, sizes) of a model on one random sequence, recurrent weights scaled."""
    model = model or load(name)
    flow = gradient_flow(model)
    module = load_module(model, from_zoo=not model.spec and ":" not in name)
    sizes = sizes or {size: 3 + n for n, size in enumerate(module.SIZES)}
    rng = np.random.default_rng(seed)
    params = scaled(module.init_params(rng, **sizes), flow.recurrent, radius)
    xs, ys = module.random_inputs(rng, steps, 1, **sizes)
    cache = run(module, params, xs, ys)
    return flow, module, params, xs, ys, cache, sizes


def run(module, params, xs, ys):
    return module._PASSES.output_gradient(params, xs, ys, (None,) * len(module.STATES))[2]


@pytest.mark.parametrize("name", MODELS)
def test_derived_jacobian_products_match_finite_differences(name):
    """ds_T/ds_t from the derived J_k equals central differences of the generated forward pass's last states
    with respect to its initial states, for every t: the Jacobians, their order and the coupling of states."""
    flow, module, params, xs, ys, cache, sizes = setup(name, steps=5)
    products = state_products(step_jacobians(flow, module, params, xs, cache, sizes))
    forced = bool(module.TEACHER_FORCED)

    def last_states(step, stacked):
        initial = {n: cache[n[:-1]][step] for n in module.STATES}
        start = 0
        for state in flow.states:
            size = sizes[str(state.rows)]
            initial[f"{state.name}0"] = stacked[start : start + size][None]
            start += size
        _, cache_from = module.forward(params, xs[step:], *((ys[step:],) if forced else ()), **initial)
        return np.concatenate([cache_from[s.name][-1, 0] for s in flow.states])

    for step in range(5):
        at = np.concatenate([cache[s.name][step, 0] for s in flow.states])
        eps = 1e-6
        columns = [
            (last_states(step, at + eps * e) - last_states(step, at - eps * e)) / (2 * eps) for e in np.eye(len(at))
        ]
        numeric = np.stack(columns, axis=1)
        assert np.allclose(products[step], numeric, rtol=1e-6, atol=1e-8), (
            step,
            np.abs(products[step] - numeric).max(),
        )


@pytest.mark.parametrize("name", ["elman", "gru", "lstm", "examples/gated_rnn.py:gated_rnn"])
def test_module_gradients_flow_through_the_derived_jacobians(name):
    """The module's backward gives dL_T/ds_t; each is J_{t+1}^T times the next: dL_T/ds_t = J_{t+1}^T dL_T/ds_{t+1}."""
    flow, module, params, xs, ys, cache, sizes = setup(name, steps=6)
    jacobians = step_jacobians(flow, module, params, xs, cache, sizes)
    gradients = state_gradients(module, params, xs, ys, flow.states)
    for step in range(5):
        carried = jacobians[step].T @ gradients[step + 1]  # jacobians[step] is J_{step+1}
        assert np.allclose(gradients[step], carried, rtol=1e-10, atol=1e-14 * np.abs(carried).max())


def normal_matrix(rng, size, radius):
    """Q R Q^T, Q orthogonal, R block diagonal with 2x2 rotation-scalings and a real entry: normal, with complex
    eigenvalues, the largest of modulus `radius`."""
    Q, _ = np.linalg.qr(rng.standard_normal((size, size)))
    R = np.zeros((size, size))
    moduli = radius * np.array([1.0, 0.7, 0.4])
    for n, (modulus, angle) in enumerate(zip(moduli[:2], (0.3, 1.1), strict=True)):
        R[2 * n : 2 * n + 2, 2 * n : 2 * n + 2] = modulus * np.array(
            [[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]
        )
    R[4, 4] = -moduli[2]
    return Q @ R @ Q.T


@pytest.mark.parametrize("radius", [0.6, 1.0, 1.3])
def test_linear_rnn_jacobian_product_has_norm_rho_to_the_k(radius):
    """For a normal W_hh the measured dh_T/dh_t has spectral norm rho(W_hh)^(T-t) to 1e-6 relative: measured by the
    module's backward (W_qh = I, so dL/do_T = e_j gives row j) and by the derived Jacobians."""
    steps, h = 30, 5
    flow, module, params, xs, ys, cache, sizes = setup("linear", steps, sizes={"d": 3, "h": h, "q": h})
    rng = np.random.default_rng(7)
    params["W_hh"] = normal_matrix(rng, h, radius)
    params["W_qh"] = np.eye(h)
    assert np.isclose(max(abs(np.linalg.eigvals(params["W_hh"]))), radius)
    cache = run(module, params, xs, ys)
    derived = state_products(step_jacobians(flow, module, params, xs, cache, sizes))
    batch = np.repeat(xs, h, axis=1)  # one sequence per output direction e_j
    for step in range(0, steps, 3):
        distance = steps - step
        d_outputs = np.zeros((distance, h, h))
        d_outputs[-1] = np.eye(h)
        _, run_from = module.forward(params, batch[step:], h0=np.repeat(cache["h"][step], h, axis=0))
        measured = module.backward(params, run_from, d_outputs)["h0"]
        expected = radius**distance
        assert np.linalg.norm(measured, 2) == pytest.approx(expected, rel=1e-6)
        assert np.linalg.norm(derived[step], 2) == pytest.approx(expected, rel=1e-6)


def test_alignment_tends_to_one_at_the_rate_of_the_eigenvalue_ratio():
    """For symmetric M, tan(angle(M^k x, v1)) <= (|l2|/|l1|)^k tan(angle at 0), with that ratio as its rate per step,
    so 1 - |cos| decays with slope 2 log(|l2|/|l1|)."""
    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    eigenvalues = np.array([2.0, -1.6, 1.0, 0.5, -0.3, 0.1])  # |l2/l1| = 0.8, the second negative
    rows, ratio = alignment(Q @ np.diag(eigenvalues) @ Q.T, rng.standard_normal(6), 60)
    assert ratio == pytest.approx(0.8, rel=1e-12)
    k, cos, tan, bound = (np.array(column) for column in zip(*rows, strict=True))
    assert np.all(tan <= bound * (1 + 1e-9))
    assert np.allclose(tan[41:] / tan[40:-1], ratio, rtol=1e-6)
    assert 1 - cos[-1] < 1e-11 and np.all(np.diff(cos[5:]) > 0)
    misalignment = 1 - cos[5:35]
    slope = np.polyfit(k[5:35], np.log(misalignment), 1)[0]
    assert slope == pytest.approx(2 * np.log(ratio), rel=2e-3)


@pytest.mark.parametrize("model", [load("elman"), sigmoid_cell()], ids=["tanh", "sigmoid"])
def test_bound_holds_for_random_cells(model):
    """||dh_T/dh_t|| <= (gamma sigma_max(W))^(T-t) at every distance and radius, gamma 1 for tanh and 1/4 for the
    sigmoid; at small radii the bound itself vanishes."""
    analysis = analyze(model, steps=25, seed=4, radii=(0.3, 1.0, 2.0, 6.0))
    table = analysis.table("gradient_norms")
    measured, bound = np.array(table.column("|dh_T/dh_t|")), np.array(table.column("upper_bound"))
    assert np.all(measured <= bound * (1 + 1e-9))
    radii, distances = np.array(table.column("radius")), np.array(table.column("T-t"))
    assert bound[(radii == 0.3) & (distances == 25)][0] < 1e-3


def test_lstm_forget_gate_near_one_keeps_the_cell_gradient_alive():
    """An LSTM cell that holds (forget gate f ~ 1: forget biases 5 + 5; input gate closed) keeps ||dc_T/dc_t|| near 1
    over 100 steps; with biases 0 (f ~ 1/2) the same cell's gradient vanishes. Along the carousel the factor is
    exactly prod f_k."""

    def norms(forget_bias):
        flow, module, params, xs, ys, _, sizes = setup("lstm", steps=100, seed=0, radius=0.5)
        params.update(b_if=np.full(4, forget_bias), b_hf=np.full(4, forget_bias), b_ii=np.full(4, -5.0))
        cache = run(module, params, xs, ys)
        products = state_products(step_jacobians(flow, module, params, xs, cache, sizes))
        assert [s.name for s in flow.states] == ["c", "h"]
        cell = [np.linalg.norm(p[:4, :4], 2) for p in products]
        carousel = np.prod(step_values(flow, module, params, xs, cache, sizes)["f"][1:, 0], axis=0)
        return np.array(cell), carousel

    alive, carousel = norms(5.0)
    assert 0.95 < carousel.min() and carousel.max() < 1
    assert np.all((0.9 <= alive) & (alive <= 1.5)), (alive.min(), alive.max())
    vanished, carousel = norms(0.0)
    assert vanished[0] < 1e-20 and carousel.max() < 1e-20
