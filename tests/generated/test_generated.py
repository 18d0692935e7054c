"""Layer 3 of the proof: every generated module against finite differences and
against a loss written here in plain NumPy, in float64 and float32."""

import numpy as np
import pytest

from bptt.app.verify.ridders import ridders
from bptt.derive.models import load, names
from bptt.derive.nodes import SoftmaxCrossEntropy, SquaredError
from bptt.tests.support.modules import forward, module_of
from bptt.tests.support.zoo import supporting

NAMES = names()
SEEDS = (0, 1, 2)
# (T, B, which sizes): T = 1 has no recursion at all, T = 7 a long one.
CASES = ((1, 2, 0), (2, 3, 1), (7, 3, 0), (7, 2, 1))


def sizes_of(module, which):
    """Two sets of distinct sizes, e.g. d=2, h=3, q=4 and d=5, h=4, q=3."""
    n = len(module.SIZES)
    return {size: 2 + i if which == 0 else n + 2 - i for i, size in enumerate(module.SIZES)}


def problem(module, T, B, sizes, seed):
    """Random parameters, inputs, targets and a non-zero initial state."""
    rng = np.random.default_rng(seed)
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, T, B, **sizes)
    initial = {key: 0.5 * rng.standard_normal((B, sizes[size])) for key, size in module.STATES.items()}
    return params, xs, ys, initial


def reference_terms(model, outputs, ys):
    """(each step's and sample's loss l_t, a function giving dl_t/d outputs), written here from the maths, before
    the loss averages them (reference_loss): the finite differences read the losses alone."""
    q = outputs.shape[-1]
    kind = type(model.concrete_loss())
    if kind is SquaredError:  # l = 1/2 ||o_t - y_t||^2
        return 0.5 * ((outputs - ys) ** 2).sum(axis=-1), lambda: outputs - ys
    if kind is SoftmaxCrossEntropy:  # l = -log softmax(s_t)[y_t]
        shifted = outputs - outputs.max(axis=-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        per_step = -np.take_along_axis(log_p, ys[..., None], axis=-1)[..., 0]
        return per_step, lambda: np.exp(log_p) - (ys[..., None] == np.arange(q))
    pytest.fail(f"model {model.name}: no reference loss for {kind.__name__}; add one to reference_loss")


def averaged(model, outputs):
    """What the loss multiplies its sum of l_t by: 1/B, or 1/(B T) for a model whose loss is the mean over steps."""
    T, B = outputs.shape[:2]
    return 1 / (B * (T if model.mean else 1))


def reference_loss(model, outputs, ys):
    """(L, dL/d outputs) of the model's loss, written here from the maths, averaged over the batch."""
    per_step, gradient = reference_terms(model, outputs, ys)
    scale = averaged(model, outputs)
    return per_step.sum() * scale, gradient() * scale


def forward_loss(name, module, params, xs, ys, initial, axis=None):
    """The loss the finite differences take: the module's forward pass (no backward pass) and the loss
    written here (reference_loss), at the arrays' current values; axis=0: each sample's part of it (the samples'
    parts sum to it)."""
    model = load(name)

    def loss():
        outputs = forward(module, params, xs, ys, **initial)[0]
        return reference_terms(model, outputs, ys)[0].sum(axis=axis) * averaged(model, outputs)

    return loss


def entry_errors(analytic, numeric, floor=1e-6, rounding=0.0):
    """|a - n| / max(|a|, |n|) per entry, less the `rounding` that the differences can have from the loss's
    own rounding alone; entries below `floor` of the largest are measured against that."""
    scale = floor * max(np.abs(analytic).max(), np.abs(numeric).max(), 1e-300)
    beyond = np.maximum(np.abs(analytic - numeric) - rounding, 0)
    return beyond / np.maximum(np.maximum(np.abs(analytic), np.abs(numeric)), scale)


def rounding_of(loss, eps=1e-3):
    """What fourth_order's differences can be off by when each of its four losses is off by 4 ulps of the
    loss (its sums' rounding): (8 * 2 + 2) * 4 ulps / 12 eps. An entry of 1e-6 of a loss of 3 cannot
    be told to 1e-7 closer than that (3e-13)."""
    return 18 * 4 * np.spacing(abs(loss)) / (12 * eps)


def fourth_order(loss, array, eps=1e-3):
    """dL/d array by (8 (L(+e) - L(-e)) - (L(+2e) - L(-2e))) / 12e on every entry (array restored).

    Differences are taken first so that an entry the loss does not depend on gets exactly 0
    (a weighted sum of the four losses would leave ~1e-13 there)."""
    out = np.zeros(array.shape)
    for index in np.ndindex(array.shape):
        saved = array[index]
        at = {}
        for step in (2, 1, -1, -2):
            array[index] = saved + step * eps
            at[step] = loss()
        array[index] = saved
        out[index] = (8 * (at[1] - at[-1]) - (at[2] - at[-2])) / (12 * eps)
    return out


def fourth_order_per_sample(losses, state, eps=1e-3):
    """fourth_order of an initial state (B, n), each sample's row moving that sample's loss alone: one pass moves
    entry i of every sample by the same step and reads each sample's own loss (losses: the B of them), so that
    each entry's difference is fourth_order's, its step, weights and order, with the other samples' losses (which
    it leaves as they are) left out of the sums."""
    out = np.zeros(state.shape)
    for i in range(state.shape[1]):
        saved = state[:, i].copy()
        at = {}
        for step in (2, 1, -1, -2):
            state[:, i] = saved + step * eps
            at[step] = losses()
        state[:, i] = saved
        out[:, i] = (8 * (at[1] - at[-1]) - (at[2] - at[-2])) / (12 * eps)
    return out


def refined(loss, array, analytic, numeric, rounding, floor=1e-6):
    """numeric, an entry whose fourth-order difference misses analytic by more than 1e-7 taken again by Ridders'
    method (app/verify/ridders.py), whose step follows the function where a step of 1e-3 is too large for it (a
    norm's deviation of 0.014 bends the loss within it). Its own error estimate must be under 1e-8 of the gradient's
    largest entry, and the comparison allows it nothing: it still proves 1e-7."""
    largest = max(np.abs(analytic).max(), np.abs(numeric).max(), 1e-300)
    for index in zip(*np.nonzero(entry_errors(analytic, numeric, floor, rounding) > 1e-7), strict=True):
        numeric[index], error = ridders(loss, array, index)
        assert error <= 1e-8 * largest, f"Ridders' differences at {index}: error {error:.1e}"
    return numeric


def worst(analytic, numeric, floor=1e-6):
    """Text showing the entry where entry_errors is largest: analytic and numeric values."""
    k = np.unravel_index(np.argmax(entry_errors(analytic, numeric, floor)), analytic.shape)
    return f"worst entry {tuple(int(i) for i in k)}: analytic {analytic[k]!r}, numeric {numeric[k]!r}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("T, B, which", CASES)
@pytest.mark.parametrize("name", NAMES)
def test_gradients_match_finite_differences(name, T, B, which, seed):
    """Every entry of every parameter gradient and of dL/dh_0 (each initial state) agrees
    with fourth-order central differences of the loss to a relative error of 1e-7, beyond what the
    differences can be off by from the loss's rounding (rounding_of); an initial state's of each sample's part of
    the loss, every sample's entry moved in one pass (fourth_order_per_sample)."""
    module = module_of(name)
    params, xs, ys, initial = problem(module, T, B, sizes_of(module, which), seed)
    _, grads = module.loss_and_grads(params, xs, ys, **initial)
    loss = forward_loss(name, module, params, xs, ys, initial)
    losses = forward_loss(name, module, params, xs, ys, initial, axis=0)
    rounding = rounding_of(loss())
    for key, array in {**params, **initial}.items():
        differences = fourth_order(loss, array) if key in params else fourth_order_per_sample(losses, array)
        numeric = refined(loss, array, grads[key], differences, rounding)
        error = entry_errors(grads[key], numeric, rounding=rounding).max()
        assert error <= 1e-7, f"{name} d{key}: relative error {error:.2e} > 1e-7; {worst(grads[key], numeric)}"


@pytest.mark.parametrize("name", NAMES)
def test_gradients_match_plain_central_differences(name):
    """The same with the plainest central differences, as a second opinion on the one above:
    (L(x + e) - L(x - e)) / 2e on every entry, error below 1e-6 of the gradient's scale."""
    module = module_of(name)
    params, xs, ys, initial = problem(module, 4, 3, sizes_of(module, 1), seed=5)
    _, grads = module.loss_and_grads(params, xs, ys, **initial)
    loss = forward_loss(name, module, params, xs, ys, initial)
    eps = 1e-5
    for key, array in {**params, **initial}.items():
        numeric = np.zeros(array.shape)
        for index in np.ndindex(array.shape):
            saved = array[index]
            array[index] = saved + eps
            up = loss()
            array[index] = saved - eps
            down = loss()
            array[index] = saved
            numeric[index] = (up - down) / (2 * eps)
        scale = np.abs(grads[key]).max()
        error = np.abs(grads[key] - numeric).max() / scale
        assert error <= 1e-6, (
            f"{name} d{key}: error {error:.2e} of max-abs {scale:.3e}; {worst(grads[key], numeric, 1.0)}\n"
            f"analytic:\n{grads[key]}\nnumeric:\n{numeric}"
        )


@pytest.mark.parametrize("T, B, which", CASES)
@pytest.mark.parametrize("name", NAMES)
def test_loss_and_backward_match_reference_loss(name, T, B, which):
    """loss_and_grads returns the loss of the maths (computed here in NumPy), and its
    gradients are backward() applied to dL/d outputs computed here."""
    module, model = module_of(name), load(name)
    params, xs, ys, initial = problem(module, T, B, sizes_of(module, which), seed=3)
    loss, grads = module.loss_and_grads(params, xs, ys, **initial)
    outputs, cache = forward(module, params, xs, ys, **initial)
    expected_loss, d_outputs = reference_loss(model, outputs, ys)
    assert loss == pytest.approx(expected_loss, rel=1e-12), f"{name}: loss {loss!r}, reference {expected_loss!r}"
    from_backward = module.backward(params, cache, d_outputs)
    assert sorted(grads) == sorted([*module.PARAMS, *module.STATES])
    for key in grads:
        scale = np.abs(grads[key]).max()
        assert np.allclose(from_backward[key], grads[key], rtol=1e-12, atol=1e-13 * scale), (
            f"{name} d{key}: backward {from_backward[key]} vs loss_and_grads {grads[key]}"
        )


@pytest.mark.parametrize("name", NAMES)
def test_float32_runs_in_float32_and_agrees_with_float64(name):
    """With float32 parameters, inputs and initial state, every returned array is float32
    and within float32 precision (1e-4 of the max-abs) of the float64 result."""
    module = module_of(name)
    params, xs, ys, initial = problem(module, 7, 3, sizes_of(module, 1), seed=4)

    def cast(a):
        return a.astype(np.float32) if np.issubdtype(a.dtype, np.floating) else a

    params32 = {k: cast(v) for k, v in params.items()}
    initial32 = {k: cast(v) for k, v in initial.items()}
    outputs, _ = forward(module, params, xs, ys, **initial)
    outputs32, _ = forward(module, params32, cast(xs), cast(ys), **initial32)
    loss, grads = module.loss_and_grads(params, xs, ys, **initial)
    loss32, grads32 = module.loss_and_grads(params32, cast(xs), cast(ys), **initial32)
    for key, low, high in [("outputs", outputs32, outputs), *((k, grads32[k], grads[k]) for k in grads)]:
        assert low.dtype == np.float32, f"{name} {key} has dtype {low.dtype}; expected float32"
        error = np.abs(low - high).max() / np.abs(high).max()
        assert error <= 1e-4, f"{name} {key}: float32 differs by {error:.2e} of max-abs; {worst(low, high, 1.0)}"
    assert float(loss32) == pytest.approx(float(loss), rel=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_missing_initial_state_means_zeros(name):
    """forward and loss_and_grads with h0=None equal the same calls with h0 = 0."""
    module = module_of(name)
    params, xs, ys, initial = problem(module, 5, 3, sizes_of(module, 0), seed=6)
    zeros = {key: np.zeros_like(value) for key, value in initial.items()}
    np.testing.assert_array_equal(forward(module, params, xs, ys)[0], forward(module, params, xs, ys, **zeros)[0])
    loss, grads = module.loss_and_grads(params, xs, ys)
    loss0, grads0 = module.loss_and_grads(params, xs, ys, **zeros)
    assert loss == loss0
    for key in grads:
        np.testing.assert_array_equal(grads[key], grads0[key], err_msg=f"{name} d{key}")


@pytest.mark.parametrize("name", supporting("causal"))
def test_outputs_do_not_depend_on_future_inputs(name):
    """Changing xs[t] leaves outputs[:t] exactly as they were, and changes outputs[t]."""
    module, model = module_of(name), load(name)
    T, sizes = 6, sizes_of(module, 1)
    params, xs, ys, initial = problem(module, T, 3, sizes, seed=7)
    outputs, _ = forward(module, params, xs, ys, **initial)
    for t in range(T):
        changed = xs.copy()
        if model.inputs[0].role == "label":  # one-hot inputs given as labels: the next class
            changed[t] = (changed[t] + 1) % sizes[str(model.inputs[0].rows)]
        else:
            changed[t] += 1.0
        after, _ = forward(module, params, changed, ys, **initial)
        np.testing.assert_array_equal(
            after[:t], outputs[:t], err_msg=f"{name}: changing xs[{t}] changed an earlier output"
        )
        assert not np.allclose(after[t], outputs[t]), f"{name}: changing xs[{t}] did not change outputs[{t}]"
