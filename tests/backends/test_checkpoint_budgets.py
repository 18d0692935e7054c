"""A budget costs what it buys (issue 25), in every backend, on the issue's Elman RNN (T = 7, B = 2, h = 4): a
budget at or above full BPTT's need, however large, runs full BPTT's schedule at once (one segment over all
T steps, T step evaluations) with its gradients; checking and scheduling any budget allocates no more than
full BPTT's call does, give or take a constant, whatever its size (tracemalloc: Python's and NumPy's
allocations, where the per-slot tables were); torch's Model checks a budget without building anything."""

import tracemalloc

import numpy as np
import pytest

from bptt.runtime.checkpoints import _checkpoint_actions
from bptt.runtime.options import Truncation
from bptt.tests.support.modules import count_forward_steps, module_of, segments_of

HUGE = (10**12, "1000000GiB", "1TiB")  # far past full BPTT's need here
BUDGETS = ("32MiB", "1GiB", *HUGE)
SIZES, STEPS, BATCH = {"d": 4, "h": 4, "q": 4}, 7, 2
SLACK = 64 * 1024  # bytes a budget may allocate beyond full BPTT's call: a few actions, no table per slot
BACKENDS = ("numpy", "torch", "jax")


def peak(function, *args, **keywords):
    """The most one call allocates at once, as tracemalloc sees it."""
    tracemalloc.start()
    try:
        function(*args, **keywords)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def setup(backend):
    """(the backend's elman module, params, xs, ys in its arrays)."""
    convert = lambda array: array  # noqa: E731
    if backend == "torch":
        convert = pytest.importorskip("torch").from_numpy
    elif backend == "jax":
        jax = pytest.importorskip("jax")
        jax.config.update("jax_enable_x64", True)
        convert = jax.numpy.asarray
    rng = np.random.default_rng(0)
    numpy_module = module_of("elman")
    params = numpy_module.init_params(rng, **SIZES)
    xs, ys = numpy_module.random_inputs(rng, STEPS, BATCH, **SIZES)
    module = module_of("elman" if backend == "numpy" else f"elman_{backend}")
    return module, {k: convert(v) for k, v in params.items()}, convert(xs), convert(ys)


def assert_identical(expected, got):
    assert list(got) == list(expected)
    for key, value in expected.items():
        assert np.array_equal(np.asarray(value), np.asarray(got[key])), key


@pytest.mark.parametrize("budget", HUGE)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_huge_budget_is_full_bptt_at_once(backend, budget):
    """The module's own copy of the schedule: one backward segment over all T steps; the loss and the
    gradients are full BPTT's, bit for bit (the same operations on the same arrays)."""
    module, params, xs, ys = setup(backend)
    actions = _checkpoint_actions(segments_of(module), Truncation.of(None), SIZES, BATCH, 8, budget, STEPS)
    assert actions == (("backward", 0, STEPS),)
    loss, expected = module.loss_and_grads(params, xs, ys)
    other, got = module.loss_and_grads(params, xs, ys, checkpoints=budget)
    assert float(other) == float(loss)
    assert_identical(expected, got)


def test_a_huge_budget_runs_each_step_once(monkeypatch):
    module, params, xs, ys = setup("numpy")
    counted = count_forward_steps(monkeypatch, module)
    module.loss_and_grads(params, xs, ys, checkpoints="1TiB")
    assert sum(counted) == STEPS


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_budget_allocates_in_proportion_to_its_size(backend):
    """Each call once first (JAX compiles, torch starts up), then its peak: every budget's within SLACK of
    full BPTT's own call (issue 25: "32MiB" added 244 MiB; the larger ones ran out of memory)."""
    module, params, xs, ys = setup(backend)
    for budget in (None, *BUDGETS):
        module.loss_and_grads(params, xs, ys, checkpoints=budget)
    full = peak(module.loss_and_grads, params, xs, ys)
    for budget in BUDGETS:
        assert peak(module.loss_and_grads, params, xs, ys, checkpoints=budget) <= full + SLACK, budget


def test_jax_apply_under_grad_with_a_huge_budget():
    jax = pytest.importorskip("jax")
    module, params, xs, _ = setup("jax")
    d_outputs = jax.numpy.asarray(np.random.default_rng(3).standard_normal((STEPS, BATCH, SIZES["q"])))

    def loss(params, checkpoints):
        return jax.numpy.sum(module.apply(params, xs, checkpoints=checkpoints) * d_outputs)

    expected = jax.grad(loss)(params, None)
    for budget in HUGE:
        assert_identical(expected, jax.grad(loss)(params, budget))


def test_torch_model_checks_a_budget_without_building_it():
    """Model(checkpoints=...) allocates what Model() does, give or take SLACK, whatever the budget (issue 25:
    "32MiB" took 1.5 GiB and tens of seconds, a byte per entry); it then trains with full BPTT's gradients."""
    torch = pytest.importorskip("torch")
    module, _, xs, ys = setup("torch")
    plain = peak(module.Model, **SIZES)
    for budget in BUDGETS:
        assert peak(module.Model, **SIZES, checkpoints=budget) <= plain + SLACK, budget
    grads = []
    for budget in (None, *HUGE):
        model = module.Model(**SIZES, init_rng=torch.Generator().manual_seed(1), checkpoints=budget)
        model.loss(model(xs), ys).backward()
        grads.append({name: getattr(model, name).grad for name in module.PARAMS})
    for other in grads[1:]:
        assert_identical(grads[0], other)
