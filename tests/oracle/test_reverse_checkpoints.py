"""BPTT in bounded memory (checkpoints=) for models with reverse-time states (issue 27): the zoo's birnn, the
bidirectional examples (the two-layer tagger, a two-layer bidirectional LSTM in torch's layout) and random cells
run in reverse time, in NumPy, torch and JAX, with slots and with a byte budget, with and without lengths=: the
loss and every gradient equal full BPTT's without checkpoints to 1e-12 (float64); the most the call keeps at once
(every group's kept states until its backward, and the states and steps of the group running backward) stays
within the budget, which the groups share (runtime/sweep_checkpoints.py); a padded batch in bounded memory equals
each sequence alone; a budget too small is one line naming the smallest that works."""

import pytest

pytest.importorskip("torch", reason="the oracle needs torch (pip install 'bptt[torch]')")

import contextlib
import functools

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_oracle_cells import generate
from test_reverse_codegen import (  # noqa: F401 (XDIST_GROUP: one unit)
    XDIST_GROUP,
    partly_mirrored,
)
from test_reverse_codegen import model_of as example_of
from test_reverse_codegen import module_of as example_module_of

from bptt.derive.direction import reverse_states
from bptt.derive.models import load
from bptt.derive.refusal import Refusal
from bptt.tests.support.cell_plans import VALUES, random_values
from bptt.tests.support.cells import cells
from bptt.tests.support.checkpoints import KeptPeak, assert_equal_gradients, peak
from bptt.tests.support.jax_eager import eagerly
from bptt.tests.support.modules import groups_of
from bptt.tests.support.modules import module_of as zoo_module
from bptt.tests.support.padded import InNumPy, assert_padded_as_alone

T, B = 9, 3
LENGTHS = np.array([4, T, 1])
BACKENDS = ("numpy", "torch", "jax")
NAMES = ("birnn", "birnn-2layer", "bilstm")  # the zoo's, then the examples'
TOL = 1e-12


@functools.cache
def model_of(name):
    return load(name) if name == "birnn" else example_of(name)


def module_of(name, backend):
    """The zoo's generated module of birnn; the examples' generated once per process, for test_reverse_codegen.py's
    tests too (one xdist unit)."""
    if name == "birnn":
        return zoo_module("birnn" if backend == "numpy" else f"birnn_{backend}")
    return example_module_of(name, backend)


def budgets(module):
    """Per group of steps: one slot, three, and a byte budget of three stored steps and two kept states as the
    module sizes them (at VALUES' sizes, B sequences, float64)."""
    groups, total = groups_of(module, {name: VALUES[name] for name in module.SIZES}), 0
    for passes, sizes in groups:
        state, forward_step, backward_step = passes.checkpoint_bytes(sizes, B, 8, 1)
        total += 3 * (forward_step + backward_step) + 2 * state
    return (len(groups), 3 * len(groups), f"{total}B")


def units(budget):
    """The budget in its units: slots, or bytes."""
    return budget if isinstance(budget, int) else int(budget.removesuffix("B"))


def running(module, backend):
    """A cell's JAX module eagerly (each segment length would be a compilation), the others as they are: the zoo's
    birnn compiled (its programs cost less than its eager operations, measured)."""
    eager = backend == "jax" and not module.__name__.startswith("bptt.generated.")
    return eagerly(module) if eager else contextlib.nullcontext(module)


def assert_bounded_equals_full(module, model, values, lengths, monkeypatch):
    """For each budget: the loss and gradients of full BPTT, and at most the budget kept at once."""
    params, xs, ys, initial = values
    states = {f"{seq.name}0": initial[seq.name] for seq in model.states}
    caller = InNumPy(module)
    loss, expected = caller.loss_and_grads(params, xs, ys, **states, lengths=lengths)
    for budget in budgets(module):
        with monkeypatch.context() as patch:
            kept = KeptPeak(patch)
            other, got = caller.loss_and_grads(params, xs, ys, checkpoints=budget, **states, lengths=lengths)
        assert abs(other - loss) <= TOL * max(1.0, abs(loss)), budget
        assert_equal_gradients(expected, got, TOL)
        assert 0 < kept.peak <= units(budget), f"checkpoints={budget!r} kept {kept.peak} at once"


@pytest.mark.parametrize("lengths", [None, LENGTHS], ids=["all-T", "lengths"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_loss_and_grads_in_bounded_memory_equal_full_bptt(name, backend, lengths, monkeypatch):
    model = model_of(name)
    with running(module_of(name, backend), backend) as module:
        assert_bounded_equals_full(module, model, random_values(model, T, B, seed=3), lengths, monkeypatch)


def assert_random_cell_in_bounded_memory(backend, model, every):
    """A random cell with every state (every=1) or every other state (every=2) run in reverse time (several groups,
    side reads), with and without lengths."""
    assume(not model.teacher_forcing and model.inputs[0].role != "label")
    mirror = partly_mirrored(model, every)
    assume(mirror is not None and reverse_states(mirror))
    values = random_values(mirror, T, B, seed=0)
    try:
        generated = generate(mirror, backend)
    except Refusal:  # a cell the generated code refuses in one line (test_reverse_codegen.py's concern)
        assume(False)
    with running(generated, backend) as module, pytest.MonkeyPatch.context() as patch:
        for lengths in (None, LENGTHS):
            assert_bounded_equals_full(module, mirror, values, lengths, patch)


RANDOM = dict(deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))


@settings(max_examples=4, **RANDOM)
@given(cells(), st.sampled_from([1, 2]))
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_random_cell_with_reverse_states_in_bounded_memory(backend, model, every):
    assert_random_cell_in_bounded_memory(backend, model, every)


@settings(max_examples=1, **RANDOM)
@given(cells(), st.sampled_from([1, 2]))
def test_a_random_cell_with_reverse_states_in_bounded_memory_in_jax(model, every):
    """JAX (eager, slower): one cell."""
    assert_random_cell_in_bounded_memory("jax", model, every)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_padded_batch_in_bounded_memory_is_each_sequence_alone(backend):
    """assert_padded_as_alone with checkpoints: nan at the padded steps never read; backward(checkpoints=) through
    the padded cache gives every padded step exactly zero."""
    model = model_of("birnn")
    with running(module_of("birnn", backend), backend) as module:
        for budget in budgets(module)[1:]:
            assert_padded_as_alone(module, model, random_values(model, T, B, seed=5), LENGTHS, checkpoints=budget)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_through_a_whole_cache_in_segments(backend):
    """backward(cache, checkpoints=): each group's backward arrays a few steps at a time, the same gradients."""
    model = model_of("bilstm")
    params, xs, ys, initial = random_values(model, T, B, seed=4)
    states = {f"{seq.name}0": initial[seq.name] for seq in model.states}
    d_outputs = np.random.default_rng(2).standard_normal((T, B, VALUES["q"]))
    with running(module_of("bilstm", backend), backend) as module:
        caller = InNumPy(module)
        for lengths in (None, LENGTHS):
            _, cache = caller.forward(params, xs, ys, **states, lengths=lengths)
            expected = caller.backward(params, cache, d_outputs, None, None)
            for budget in (1, 4, "3KiB"):
                assert_equal_gradients(expected, caller.backward(params, cache, d_outputs, None, budget), TOL)


def test_torchs_model_in_bounded_memory_on_a_packed_sequence(monkeypatch):
    """Model(checkpoints=) of the two-layer bidirectional LSTM on a PackedSequence: loss.backward() gives the
    gradients of Model without checkpoints (every parameter and initial state), keeping at most the budget."""
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    model, module = model_of("bilstm"), module_of("bilstm", "torch")
    params, xs, ys, initial = random_values(model, T, B, seed=8)
    found = []
    for checkpoints in (None, *budgets(module)):
        net = module.Model(**VALUES, dtype=torch.float64, checkpoints=checkpoints)
        with torch.no_grad():
            for name, value in params.items():
                getattr(net, name).copy_(torch.tensor(value))
        leaves = {f"{seq.name}0": torch.tensor(initial[seq.name], requires_grad=True) for seq in model.states}
        packed = pack_padded_sequence(torch.tensor(xs), torch.tensor(LENGTHS), enforce_sorted=False)
        with monkeypatch.context() as patch:
            kept = KeptPeak(patch)
            outputs, _ = pad_packed_sequence(net(packed, **leaves), total_length=T)
            net.loss(outputs, torch.tensor(ys), lengths=torch.tensor(LENGTHS)).backward()
        assert checkpoints is None or 0 < kept.peak <= units(checkpoints), checkpoints
        found.append({name: getattr(net, name).grad.numpy() for name in module.PARAMS})
        found[-1].update({key: leaf.grad.numpy() for key, leaf in leaves.items()})
    for got in found[1:]:
        assert_equal_gradients(found[0], got, TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_budget_too_small_is_one_line_naming_the_smallest(backend):
    """Fewer slots than groups, or bytes short of one stored step of each group: a one-line ValueError naming the
    smallest budget that works, which then runs."""
    model = model_of("birnn")
    params, xs, ys, _ = random_values(model, T, B, seed=1)
    with running(module_of("birnn", backend), backend) as module:
        caller = InNumPy(module)
        groups, smallest = budgets(module)[0], 0
        for passes, sizes in groups_of(module, {name: VALUES[name] for name in module.SIZES}):
            smallest += sum(passes.checkpoint_bytes(sizes, B, 8, 1)[1:])
        for small, enough in ((groups - 1, groups), (f"{smallest - 1}B", f"{smallest}B")):
            with pytest.raises(ValueError, match="groups of steps") as error:
                caller.loss_and_grads(params, xs, ys, checkpoints=small)
            message = str(error.value)
            assert "\n" not in message and f"checkpoints={enough!r} or more" in message, message
            caller.loss_and_grads(params, xs, ys, checkpoints=enough)


def test_memory_stays_within_the_budget():
    """What one NumPy call allocates at its peak (tracemalloc): full BPTT's grows with every step it stores; in
    bounded memory, only what is kept as xs is grows with T (the values handed on, each group's input as it runs:
    stacked, and reversed from a copy), beside the budget, the schedule's tables and the gradients."""
    module = zoo_module("birnn")
    rng = np.random.default_rng(0)
    sizes, steps, batch = dict(d=8, h=32, q=8), 400, 4
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, **sizes)
    lengths = np.array([steps, steps // 2, 3, steps - 1])
    groups = groups_of(module, sizes)
    row = steps * batch * 8  # bytes of one row of every step
    kept_as_xs = row * (sizes["h"] + 2 * (sizes["d"] + sizes["h"]) + sizes["d"])  # h_f; birnn's group 2 input, twice
    tables = 20 * steps * 12  # the programme's tables: 12 bytes per level and step
    gradients = sum(p.nbytes for p in params.values())
    module.free_workspace()
    for padded in (None, lengths):
        full = peak(lambda padded=padded: module.loss_and_grads(params, xs, ys, lengths=padded))
        for budget in (20, "204800B"):
            paid = units(budget) if isinstance(budget, str) else 0
            for passes, own in groups if not paid else ():
                paid += budget // len(groups) * sum(passes.checkpoint_bytes(own, batch, 8, 1)[1:])
            bounded = peak(
                lambda b=budget, padded=padded: module.loss_and_grads(params, xs, ys, checkpoints=b, lengths=padded)
            )
            assert bounded <= paid + kept_as_xs + tables + 3 * gradients + 64 * 1024 < full, (budget, bounded, full)
