"""A module's checkpoint_bytes (its runtime's) counts what its backend holds per stored step (issue 25): a schedule
sized by an undercount stores more steps than the budget pays for. Counted from the arrays themselves,
per step (the difference between two lengths T, so what does not grow with T drops out), in full BPTT:
torch's segment outputs, its cache (the inputs aside), dL/doutputs and the backward pass's work tensors;
JAX's as XLA accounts for its compiled backward pass (arguments, temporaries, outputs) plus the outputs,
the inputs aside where the cache holds them, not a copy."""

import pathlib

import numpy as np
import pytest

from bptt.tests.support.checkpoints import SIZES, problem
from bptt.tests.support.modules import module_of, runtime_of, segments_of
from bptt.tests.support.zoo import supporting

GENERATED = pathlib.Path(__file__).parents[2] / "generated"
MODELS = [name.replace("-", "_") for name in supporting("checkpoints")]
LENGTHS, BATCH = (40, 80), 2


def estimate(module, sizes):
    """The module's bytes of one stored step: its forward pass's and its backward pass's."""
    return sum(segments_of(module).checkpoint_bytes(sizes, BATCH, 8, 1)[1:])


def setup(name, backend, steps, convert):
    """(module, params, sizes, xs, targets (None unless teacher-forced), initial states) in the backend's arrays."""
    numpy_module, module = module_of(name), module_of(f"{name}_{backend}")
    params, xs, ys, initial = problem(numpy_module, steps=steps, batch=BATCH)
    sizes = dict(zip(numpy_module.SIZES, SIZES, strict=True))
    sizes.update(T=steps, B=BATCH)
    states = tuple(convert(initial[name]) for name in module.STATES)
    return module, {k: convert(v) for k, v in params.items()}, sizes, convert(xs), convert(ys), states


def torch_held(name, steps):
    """Bytes torch holds at the peak of a segment's backward pass over `steps` steps, inputs aside."""
    torch = pytest.importorskip("torch")
    module, params, sizes, xs, ys, states = setup(name, "torch", steps, torch.from_numpy)
    passes = segments_of(module)
    outputs, cache = passes.segment_forward(params, sizes, torch.float64, xs, ys, states)
    d_outputs = passes.segment_loss(outputs, ys, steps)[1]
    work = passes.arrays(passes.backward_work, steps, BATCH, sizes, torch.float64, "cpu")
    inputs = {xs.untyped_storage().data_ptr(), ys.untyped_storage().data_ptr()}
    storages = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for t in (outputs, d_outputs, *cache.values(), *work.values())
    }
    return sum(size for pointer, size in storages.items() if pointer not in inputs)


def jax_held(name, steps):
    """Bytes XLA holds at the peak of a segment's backward pass over `steps` steps, and the outputs."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    module, params, sizes, xs, ys, states = setup(name, "jax", steps, jax.numpy.asarray)
    passes = segments_of(module)
    outputs, cache = passes.segment_forward(params, sizes, np.float64, xs, ys, states)
    d_outputs = passes.segment_loss(outputs, ys, steps)[1]
    keep = jax.numpy.ones((steps,))
    compiled = module._gradients_and_following.lower(None, params, cache, d_outputs, keep).compile()
    account = compiled.memory_analysis()
    held = account.argument_size_in_bytes + account.temp_size_in_bytes + account.output_size_in_bytes + outputs.nbytes
    inputs = {array.unsafe_buffer_pointer() for array in (xs, ys)}
    return held - sum(array.nbytes for array in cache.values() if array.unsafe_buffer_pointer() in inputs)


@pytest.mark.parametrize("held", [torch_held, jax_held], ids=["torch", "jax"])
@pytest.mark.parametrize("name", MODELS)
def test_the_estimate_counts_what_a_stored_step_holds(name, held):
    short, long = LENGTHS
    per_step = (held(name, long) - held(name, short)) / (long - short)
    module = module_of(f"{name}_{held.__name__.removesuffix('_held')}")
    sizes = dict(zip(module_of(name).SIZES, SIZES, strict=True))
    assert per_step <= estimate(module, sizes), (
        f"{name}: {per_step:.0f} bytes a step, estimated {estimate(module, sizes)}"
    )


@pytest.mark.parametrize("name", ["elman", "lstm", "linear"])
def test_model_loss_keeps_nothing_beside_the_outputs(name, monkeypatch):
    """torch's Model.loss saves for its backward pass only the outputs and the targets (no copy of all T
    steps, such as log-softmax's), and its backward, a few steps at a time, is the derived dL/doutputs."""
    torch = pytest.importorskip("torch")
    module, params, sizes, xs, ys, _ = setup(name, "torch", 9, torch.from_numpy)
    monkeypatch.setattr(runtime_of(module), "_LOSS_PART", 2 * BATCH * 8 * max(sizes.values()))  # a few steps a part
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
