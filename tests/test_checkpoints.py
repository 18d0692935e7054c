"""BPTT in bounded memory (checkpoints=): the gradients equal full BPTT's for every zoo model, every
truncation mode, the NumPy and torch modules (and JAX's: tests/test_checkpoints_jax.py); the step
evaluations are the schedule's; the memory is bounded; bad budgets are one-line errors.

The recursion runs the same operations as full BPTT: in NumPy every adjoint, and so the initial states'
gradients, are equal bit for bit (torch's products over all steps at once round differently for fewer
rows: equal to 1e-14 there). A parameter's gradient is a sum over all steps, computed in full BPTT as
one product over the T*B rows and here as a product per segment, summed: equal to rounding (1e-14
relative to the gradient's largest entry in float64, a few ulps in float32)."""

import tracemalloc

import numpy as np
import pytest
import torch
from support import module_of
from test_checkpoint_schedule import optimum

from bptt.codegen.printing import schedule
from bptt.derive.models import names

SIZES = (2, 3, 4)
TRUNCATIONS = [None, ("window", 3), ("chunk", 4), ("random", 0.5)]
BUDGETS = [1, 3, 8, "16KiB"]


def problem(module, dtype=np.float64, steps=17, batch=3, seed=0):
    rng = np.random.default_rng(seed)
    sizes = dict(zip(module.SIZES, SIZES, strict=True))
    params = module.init_params(rng, dtype, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, dtype, **sizes)
    initial = {key: (0.5 * rng.standard_normal((batch, sizes[size]))).astype(dtype) for key, size in module.STATES.items()}
    return params, xs, ys, initial


def assert_equal_gradients(expected, got, tolerance, initial_keys):
    assert list(got) == list(expected)
    for key, value in expected.items():
        value, other = np.asarray(value), np.asarray(got[key])
        if key in initial_keys:
            assert np.array_equal(value, other), f"{key}: the recursion is not repeated exactly"
        scale = max(float(np.abs(value).max()), 1e-300)
        assert float(np.abs(value - other).max()) <= tolerance * scale, key


def numpy_run(module, values, truncate, checkpoints):
    params, xs, ys, initial = values
    rng = np.random.default_rng(7)  # the same draws of random truncation for both
    return module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng, checkpoints=checkpoints)


def torch_run(module, values, truncate, checkpoints):
    params, xs, ys, initial = values
    tensors = {k: torch.from_numpy(v) for k, v in params.items()}
    states = {k: torch.from_numpy(v) for k, v in initial.items()}
    rng = torch.Generator().manual_seed(7)
    loss, grads = module.loss_and_grads(
        tensors, torch.from_numpy(xs), torch.from_numpy(ys), **states, truncate=truncate, rng=rng, checkpoints=checkpoints
    )
    return float(loss), {k: v.numpy() for k, v in grads.items()}


@pytest.mark.parametrize("truncate", TRUNCATIONS, ids=["full", "window", "chunk", "random"])
@pytest.mark.parametrize("name", names())
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_loss_and_grads_equal_full_bptt(backend, name, truncate):
    module = module_of(name) if backend == "numpy" else module_of(f"{name}_torch")
    run = numpy_run if backend == "numpy" else torch_run
    values = problem(module_of(name))
    loss, expected = run(module, values, truncate, None)
    for budget in BUDGETS:
        other_loss, got = run(module, values, truncate, budget)
        assert abs(other_loss - loss) <= 1e-14 * abs(loss), budget
        assert_equal_gradients(expected, got, 1e-14, module.STATES if backend == "numpy" else ())


@pytest.mark.parametrize("name", ["elman", "lstm", "gru", "elman-jordan"])
def test_float32_agrees_to_a_few_ulps(name):
    module = module_of(name)
    values = problem(module, np.float32)
    _, expected = numpy_run(module, values, None, None)
    for budget in (2, 5):
        assert_equal_gradients(expected, numpy_run(module, values, None, budget)[1], 2e-6, module.STATES)


@pytest.mark.parametrize("truncate", TRUNCATIONS, ids=["full", "window", "chunk", "random"])
@pytest.mark.parametrize("name", ["elman", "lstm", "jordan", "lstm-peephole"])
def test_backward_through_a_whole_cache_in_segments(name, truncate):
    """backward(checkpoints=s): the cache holds every step, so nothing is recomputed; the backward pass's
    own arrays hold s steps at a time."""
    module = module_of(name)
    params, xs, ys, initial = values = problem(module)
    outputs, cache = module.forward(params, xs, *((ys,) if module.TEACHER_FORCED else ()), **initial)
    d_outputs = np.random.default_rng(3).standard_normal(outputs.shape)
    expected = module.backward(params, cache, d_outputs, truncate, np.random.default_rng(7))
    for budget in (1, 4, 100):
        got = module.backward(params, cache, d_outputs, truncate, np.random.default_rng(7), checkpoints=budget)
        assert_equal_gradients(expected, got, 1e-14, module.STATES)
    assert values


@pytest.mark.parametrize("truncate", [None, ("window", 2), ("random", 0.5)], ids=["full", "window", "random"])
@pytest.mark.parametrize("name", ["elman", "lstm", "elman-jordan"])
def test_torch_model_with_checkpoints(name, truncate):
    """Model(..., checkpoints=s): loss.backward() through CheckpointedBPTT gives BPTT's gradients."""
    module = module_of(f"{name}_torch")
    sizes = dict(zip(module.SIZES, SIZES, strict=True))
    _, xs, ys, _ = problem(module_of(name))
    xs, ys = torch.from_numpy(xs), torch.from_numpy(ys)
    grads = []
    for checkpoints in (None, 3):
        model = module.Model(
            **sizes, truncate=truncate, rng=torch.Generator().manual_seed(5), init_rng=torch.Generator().manual_seed(1),
            checkpoints=checkpoints,
        )
        outputs = model(xs, ys) if module.TEACHER_FORCED else model(xs)
        model.loss(outputs, ys).backward()
        grads.append({name: getattr(model, name).grad.numpy() for name in module.PARAMS})
    assert_equal_gradients(grads[0], grads[1], 1e-14, ())


def test_the_step_evaluations_are_the_schedules(monkeypatch):
    """Every step the forward pass runs is counted: their number is the schedule's (the optimum's)."""
    module = module_of("elman")
    values = problem(module, steps=120)
    counted = []
    forward = module._forward
    monkeypatch.setattr(module, "_forward", lambda params, sizes, x, *rest: counted.append(len(x)) or forward(params, sizes, x, *rest))
    numpy_run(module, values, None, 10)
    assert sum(counted) == schedule._evaluations(schedule._schedule(120, schedule._capacities(10, 1, 1)))
    assert sum(counted) == optimum(120, schedule._capacities(10, 1, 1))  # the full search of the programme


def peak(call):
    tracemalloc.start()
    call()
    found = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return found


@pytest.mark.parametrize("name", ["elman", "lstm"])
def test_memory_stays_within_the_budget(name):
    """What one call allocates at its peak (tracemalloc sees NumPy's arrays, and the schedule's tables):
    full BPTT's grows with T; with 40 slots it stays within what the schedule stores at most (40 steps),
    the schedule's tables and the gradients."""
    module = module_of(name)
    rng = np.random.default_rng(0)
    sizes = dict(d=16, h=64, q=16)
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, 1000, 8, **sizes)
    module.free_workspace()
    full = peak(lambda: module.loss_and_grads(params, xs, ys))
    state, forward_step, backward_step = module._checkpoint_bytes(sizes, 8, 8, 1)
    stored = 40 * (forward_step + backward_step)
    tables = 40 * 1000 * 12  # the programme's tables: 12 bytes per level and step
    gradients = sum(p.nbytes for p in params.values())
    bounded = peak(lambda: module.loss_and_grads(params, xs, ys, checkpoints=40))
    assert bounded <= stored + tables + 3 * gradients + 64 * 1024 < full / 5, (bounded, full)


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "lots", "12", "0KiB", "10B"])
def test_bad_budgets_are_one_line_errors(bad):
    module, torch_module = module_of("lstm"), module_of("lstm_torch")
    params, xs, ys, _ = problem(module)
    calls = [lambda: module.loss_and_grads(params, xs, ys, checkpoints=bad)]
    tensors = {k: torch.from_numpy(v) for k, v in params.items()}
    calls.append(lambda: torch_module.loss_and_grads(tensors, torch.from_numpy(xs), torch.from_numpy(ys), checkpoints=bad))
    outputs, cache = module.forward(params, xs)
    calls.append(lambda: module.backward(params, cache, outputs, checkpoints=bad))
    if not isinstance(bad, str):
        calls.append(lambda: torch_module.Model(2, 3, 4, checkpoints=bad))
    for call in calls:
        with pytest.raises(ValueError, match="checkpoints") as error:
            call()
        assert "\n" not in str(error.value)
