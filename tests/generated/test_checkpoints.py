"""BPTT in bounded memory (checkpoints=) in the NumPy modules: the gradients equal full BPTT's for every zoo
model in every truncation mode; backward through a whole cache in segments; the step evaluations are the
schedule's; the memory is bounded; bad budgets are one-line errors. torch and JAX: tests/backends/."""

import numpy as np
import pytest

from bptt.runtime import schedule
from bptt.tests.support.checkpoints import (
    BAD,
    TRUNCATIONS,
    assert_equal_gradients,
    assert_same_loss,
    budgets,
    numpy_run,
    optimum,
    peak,
    problem,
    zoo_cases,
)
from bptt.tests.support.modules import count_forward_steps, module_of, segments_of


@pytest.mark.parametrize(("name", "mode"), zoo_cases(TRUNCATIONS))
def test_loss_and_grads_equal_full_bptt(name, mode):
    module, truncate = module_of(name), TRUNCATIONS[mode]
    values = problem(module)
    loss, expected = numpy_run(module, values, truncate, None)
    for budget in budgets(module, truncate):
        other, got = numpy_run(module, values, truncate, budget)
        assert_same_loss(loss, other)
        assert_equal_gradients(expected, got, 1e-14, module.STATES)


@pytest.mark.parametrize("name", ["lstm", "elman-jordan"])
def test_float32_agrees_to_a_few_ulps(name):
    module = module_of(name)
    values = problem(module, np.float32)
    _, expected = numpy_run(module, values, None, None)
    for budget in (2, 5):
        assert_equal_gradients(expected, numpy_run(module, values, None, budget)[1], 2e-6, module.STATES)


@pytest.mark.parametrize("mode", TRUNCATIONS)
@pytest.mark.parametrize("name", ["lstm", "jordan"])
def test_backward_through_a_whole_cache_in_segments(name, mode):
    """backward(checkpoints=s): the cache holds every step, so nothing is recomputed; the backward pass's
    own arrays hold s steps at a time (jordan: no flow through time, nothing crosses a segment)."""
    module, truncate = module_of(name), TRUNCATIONS[mode]
    params, xs, ys, initial = problem(module)
    outputs, cache = module.forward(params, xs, *((ys,) if module.TEACHER_FORCED else ()), **initial)
    d_outputs = np.random.default_rng(3).standard_normal(outputs.shape)
    expected = module.backward(params, cache, d_outputs, truncate, np.random.default_rng(7))
    for budget in (1, 4, 100):
        got = module.backward(params, cache, d_outputs, truncate, np.random.default_rng(7), checkpoints=budget)
        assert_equal_gradients(expected, got, 1e-14, module.STATES)


def test_the_step_evaluations_are_the_schedules(monkeypatch):
    """Every step the forward pass runs is counted: their number is the schedule's, the optimum's."""
    module = module_of("elman")
    values = problem(module, steps=60)
    counted = count_forward_steps(monkeypatch, module)
    numpy_run(module, values, None, 7)
    assert sum(counted) == schedule._evaluations(schedule._schedule(60, schedule._capacities(7, 1, 1, 60)))
    assert sum(counted) == optimum(60, schedule._capacities(7, 1, 1, 60))  # the full search of the programme


def test_memory_stays_within_the_budget():
    """What one call allocates at its peak (tracemalloc sees NumPy's arrays, and the schedule's tables): full
    BPTT's grows with T; with 20 slots it stays within what the schedule stores at most (20 steps), the
    schedule's tables and the gradients. The LSTM: a stored step holds its gates too."""
    module = module_of("lstm")
    rng = np.random.default_rng(0)
    sizes, steps, batch = dict(d=8, h=32, q=8), 400, 4
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, **sizes)
    module.free_workspace()
    full = peak(lambda: module.loss_and_grads(params, xs, ys))
    state, forward_step, backward_step = segments_of(module).checkpoint_bytes(sizes, batch, 8, 1)
    stored = 20 * (forward_step + backward_step)
    tables = 20 * steps * 12  # the programme's tables: 12 bytes per level and step
    gradients = sum(p.nbytes for p in params.values())
    bounded = peak(lambda: module.loss_and_grads(params, xs, ys, checkpoints=20))
    assert bounded <= stored + tables + 3 * gradients + 64 * 1024 < full / 5, (bounded, full)


@pytest.mark.parametrize("bad", BAD)
def test_bad_budgets_are_one_line_errors(bad):
    module = module_of("lstm")
    params, xs, ys, _ = problem(module)
    outputs, cache = module.forward(params, xs)
    for call in (
        lambda: module.loss_and_grads(params, xs, ys, checkpoints=bad),
        lambda: module.backward(params, cache, outputs, checkpoints=bad),
    ):
        with pytest.raises(ValueError, match="checkpoints") as error:
            call()
        assert "\n" not in str(error.value)
