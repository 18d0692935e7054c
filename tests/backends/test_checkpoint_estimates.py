"""A module's checkpoint_bytes (its runtime's) counts what its backend holds per stored step (issue 25): a schedule
sized by an undercount stores more steps than the budget pays for. Counted from the arrays themselves,
per step (the difference between two lengths T, so what does not grow with T drops out), in full BPTT:
torch's segment outputs, its cache (the inputs aside), dL/doutputs and the backward pass's work tensors;
JAX's as XLA accounts for its compiled backward pass (arguments, temporaries, outputs) plus the outputs,
the inputs aside where the cache holds them, not a copy."""

import pathlib

import numpy as np
import pytest

from bptt.runtime.sweep_checkpoints import _Call
from bptt.tests.support.checkpoints import SIZES, problem
from bptt.tests.support.modules import module_of, runtime_of, segments_of
from bptt.tests.support.zoo import supporting

GENERATED = pathlib.Path(__file__).parents[2] / "generated"
MODELS = [name.replace("-", "_") for name in supporting("checkpoints")]
LENGTHS, BATCH = (40, 80), 2


def estimate(passes, sizes):
    """The bytes of one stored step of a group's passes: its forward pass's and its backward pass's."""
    return sum(passes.checkpoint_bytes(sizes, BATCH, 8, 1)[1:])


def setup(name, backend, steps, convert):
    """(module, params, sizes, xs, targets (None unless teacher-forced), initial states) in the backend's arrays."""
    numpy_module, module = module_of(name), module_of(f"{name}_{backend}")
    params, xs, ys, initial = problem(numpy_module, steps=steps, batch=BATCH)
    sizes = dict(zip(numpy_module.SIZES, SIZES, strict=True))
    sizes.update(T=steps, B=BATCH)
    states = tuple(convert(initial[name]) for name in module.STATES)
    return module, {k: convert(v) for k, v in params.items()}, sizes, convert(xs), convert(ys), states


def groups(name, backend, steps, convert):
    """Each group of steps the module runs, as (its _Passes, params, sizes, input, targets, initial states): the
    module's own for a forward-only model; a model with reverse-time states' groups, each fed what the runtime
    feeds it (sweep_checkpoints.py's _Call: its input stacked and reversed), the last with the targets."""
    module, params, sizes, xs, ys, states = setup(name, backend, steps, convert)
    if not hasattr(module, "_SWEEPS"):
        return [(segments_of(module), params, sizes, xs, ys, states)]
    call, found = _Call(module._SWEEPS, params, xs, states, None, 10**9), []
    for k in range(len(module._SWEEPS.sweeps)):
        last = k == len(module._SWEEPS.sweeps) - 1
        run = call.group(k, ys if last else None)
        found.append((module._SWEEPS.sweeps[k].passes, run.params, run.sizes, run.x, run.y, run.initial))
        if not last:
            call.kept(k)
    return found


def d_outputs_of(passes, outputs, y, steps):
    """dL/doutputs of a group: its loss's, or (a group whose outputs later groups read) a fresh array of theirs."""
    return passes.segment_loss(outputs, y, steps)[1] if y is not None else 1 * outputs


def torch_held(group, steps):
    """Bytes torch holds at the peak of a segment's backward pass over `steps` steps, inputs aside."""
    torch = pytest.importorskip("torch")
    passes, params, sizes, xs, ys, states = group
    outputs, cache = passes.segment_forward(params, sizes, torch.float64, xs, ys, states)
    d_outputs = d_outputs_of(passes, outputs, ys, steps)
    work = passes.arrays(passes.backward_work, steps, BATCH, sizes, torch.float64, "cpu")
    inputs = {t.untyped_storage().data_ptr() for t in (xs, ys) if t is not None}
    storages = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for t in (outputs, d_outputs, *cache.values(), *work.values())
    }
    return sum(size for pointer, size in storages.items() if pointer not in inputs)


def jax_held(group, steps):
    """Bytes XLA holds at the peak of a segment's backward pass over `steps` steps, and the outputs."""
    jax = pytest.importorskip("jax")
    passes, params, sizes, xs, ys, states = group
    outputs, cache = passes.segment_forward(params, sizes, np.float64, xs, ys, states)
    d_outputs = d_outputs_of(passes, outputs, ys, steps)
    keep = jax.numpy.ones((steps,))
    compiled = passes.gradients.lower(None, params, cache, d_outputs, keep).compile()
    account = compiled.memory_analysis()
    held = account.argument_size_in_bytes + account.temp_size_in_bytes + account.output_size_in_bytes + outputs.nbytes
    inputs = {array.unsafe_buffer_pointer() for array in (xs, ys) if array is not None}
    return held - sum(array.nbytes for array in cache.values() if array.unsafe_buffer_pointer() in inputs)


def converter(backend):
    if backend == "torch":
        return pytest.importorskip("torch").from_numpy
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax.numpy.asarray


@pytest.mark.parametrize("backend", ["torch", "jax"])
@pytest.mark.parametrize("name", MODELS)
def test_the_estimate_counts_what_a_stored_step_holds(name, backend):
    """Each group of steps of a model with reverse-time states too: their budget is shared in proportion to these."""
    held, (short, long) = {"torch": torch_held, "jax": jax_held}[backend], LENGTHS
    convert = converter(backend)
    pairs = zip(groups(name, backend, short, convert), groups(name, backend, long, convert), strict=True)
    for k, (few, many) in enumerate(pairs):
        per_step = (held(many, long) - held(few, short)) / (long - short)
        passes, sizes = few[0], few[2]
        assert per_step <= estimate(passes, sizes), (
            f"{name} (group {k + 1}): {per_step:.0f} bytes a step, estimated {estimate(passes, sizes)}"
        )


@pytest.mark.parametrize("name", ["elman", "lstm", "linear"])
def test_model_loss_keeps_nothing_beside_the_outputs(name, monkeypatch):
    """torch's Model.loss saves for its backward pass only the outputs and the targets (no copy of all T
    steps, such as log-softmax's), and its backward, a few steps at a time, is the derived dL/doutputs."""
    torch = pytest.importorskip("torch")
    module, params, sizes, xs, ys, _ = setup(name, "torch", 9, torch.from_numpy)
    monkeypatch.setattr(
        runtime_of(module, "_check_compile"), "_LOSS_PART", 2 * BATCH * 8 * max(sizes.values())
    )  # a few steps a part
    model = module.Model(*(sizes[size] for size in module_of(name).SIZES), checkpoints=3)
    outputs = model(xs, *([ys] if module.TEACHER_FORCED else []))
    outputs.retain_grad()
    given = {outputs.untyped_storage().data_ptr(), ys.untyped_storage().data_ptr()}
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: saved.append(t.untyped_storage().data_ptr()) or t, lambda t: t
    ):
        loss = model.loss(outputs, ys)
    assert set(saved) <= given
    loss.backward()
    expected_loss, expected = segments_of(module).segment_loss(outputs.detach(), ys, xs.shape[0])
    assert torch.allclose(loss, expected_loss, rtol=1e-14, atol=0)
    assert torch.allclose(outputs.grad, expected, rtol=1e-14, atol=1e-300)
