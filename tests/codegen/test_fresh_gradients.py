"""Every returned gradient owns its memory (codegen/passes/fresh.py), in every backend and every zoo model: no two
share memory, none shares memory with the parameters, the inputs or the initial states, and a later call
overwrites none. torch's Model then gives the right gradients under clip_grad_norm_ (which scales each
.grad in place) and when several backward() calls accumulate into .grad without zero_grad()."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import importlib
import itertools

import jax
import numpy as np
import torch

from bptt.app.verify.check import problem
from bptt.tests.support.zoo import supporting

jax.config.update("jax_enable_x64", True)

SIZES = {"d": 2, "h": 3, "q": 4}
STEPS, BATCH = 5, 3
TRUNCATIONS = (None, ("window", 2))
# test_oracle.py calls the zoo's JAX modules on arrays of these shapes in these truncations: in one work unit
# (tests/conftest.py), each jitted function is compiled once for both files.
XDIST_GROUP = "zoo modules at T=5, B=3"


def modules(name):
    stem = name.replace("-", "_")
    return {
        backend: importlib.import_module(f"bptt.generated.{stem}{suffix}")
        for backend, suffix in (("numpy", ""), ("torch", "_torch"), ("jax", "_jax"))
    }


@pytest.fixture(scope="module", params=supporting("truncate"))
def zoo(request):
    found = modules(request.param)
    return request.param, found, problem(found["numpy"], steps=STEPS, batch=BATCH, seed=3, sizes=SIZES)


def extent(backend, array):
    """(first, last) byte of the memory an array lives in: its torch storage, its JAX buffer."""
    if backend == "torch":
        storage = array.untyped_storage()
        return storage.data_ptr(), storage.data_ptr() + storage.nbytes()
    start = array.unsafe_buffer_pointer()
    return start, start + array.nbytes


def shares(backend, first, second):
    """np.shares_memory for NumPy; for torch and JAX, whether their storages or buffers overlap."""
    if backend == "numpy":
        return np.shares_memory(first, second)
    (a, b), (c, d) = extent(backend, first), extent(backend, second)
    return a < d and c < b


def call(backend, module, instance, truncate, jit=False):
    """loss_and_grads of the backend's module on the instance's arrays: (its gradients, its arguments)."""
    convert = {"numpy": np.asarray, "torch": torch.from_numpy, "jax": jax.numpy.asarray}[backend]
    arguments = {key: convert(value) for key, value in {**instance.params, **instance.initial}.items()}
    params = {key: arguments[key] for key in instance.params}
    initial = {key: arguments[key] for key in instance.initial}
    xs, ys = convert(instance.xs), convert(instance.ys)
    function = jax.jit(module.loss_and_grads, static_argnames="truncate") if jit else module.loss_and_grads
    _, grads = function(params, xs, ys, **initial, truncate=truncate)
    return grads, {**arguments, "xs": xs, "ys": ys}


@pytest.mark.parametrize(
    ("backend", "truncate"),
    [(backend, truncate) for backend in ("numpy", "torch", "jax") for truncate in TRUNCATIONS] + [("jax-jit", None)],
    ids=lambda value: value if isinstance(value, str) else "full" if value is None else value[0],
)
def test_no_gradient_shares_memory(zoo, backend, truncate):
    name, found, instance = zoo
    framework = backend.split("-")[0]
    grads, arguments = call(framework, found[framework], instance, truncate, jit=backend == "jax-jit")
    shared = [(a, b) for a, b in itertools.combinations(sorted(grads), 2) if shares(framework, grads[a], grads[b])]
    assert not shared, f"{name}: gradients that share memory: {shared}"
    shared = [(a, b) for a in sorted(grads) for b in sorted(arguments) if shares(framework, grads[a], arguments[b])]
    assert not shared, f"{name}: gradients that share memory with an argument: {shared}"


def test_a_later_call_overwrites_no_gradient(zoo):
    """The NumPy module reuses its workspace from one call to the next: the gradients it returned stay."""
    name, found, instance = zoo
    module = found["numpy"]
    first = module.loss_and_grads(instance.params, instance.xs, instance.ys, **instance.initial)[1]
    kept = {key: value.copy() for key, value in first.items()}
    other = problem(module, steps=STEPS, batch=BATCH, seed=4, sizes=SIZES)
    module.loss_and_grads(other.params, other.xs, other.ys, **other.initial)
    for key, value in first.items():
        np.testing.assert_array_equal(value, kept[key], err_msg=f"{name}: {key}")


def torch_model(found, instance):
    model = found["torch"].Model(**SIZES)
    with torch.no_grad():
        for key, value in instance.params.items():
            getattr(model, key).copy_(torch.from_numpy(value))
    return model


def backward_once(found, model, instance):
    xs, ys = torch.from_numpy(instance.xs), torch.from_numpy(instance.ys)
    teacher = (ys,) if found["torch"].TEACHER_FORCED else ()
    model.loss(model(xs, *teacher), ys).backward()


def numpy_grads(found, instance):
    """The NumPy module's parameter gradients (from zero initial states, as Model's default)."""
    grads = found["numpy"].loss_and_grads(instance.params, instance.xs, instance.ys)[1]
    return {key: grads[key] for key in found["numpy"].PARAMS}


def test_clip_grad_norm_scales_each_gradient_once(zoo):
    """clip_grad_norm_ to a tenth of the norm: each .grad is the NumPy module's gradient times
    max_norm / (norm + 1e-6), as torch documents it, computed here by hand."""
    name, found, instance = zoo
    model = torch_model(found, instance)
    backward_once(found, model, instance)
    expected = numpy_grads(found, instance)
    norm = np.sqrt(sum(np.sum(value**2) for value in expected.values()))
    max_norm = 0.1 * norm
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    for key, parameter in model.named_parameters():
        want = expected[key] * (max_norm / (norm + 1e-6))
        got = parameter.grad.numpy()
        assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max(), f"{name}: {key}"


def test_backward_calls_accumulate_without_zero_grad(zoo):
    """Three backward() calls on three batches, no zero_grad(): each .grad is the sum of the three
    NumPy gradients."""
    name, found, instance = zoo
    model = torch_model(found, instance)
    batches = [problem(found["numpy"], steps=STEPS, batch=BATCH, seed=seed, sizes=SIZES) for seed in (5, 6, 7)]
    expected = {}
    for batch in batches:
        batch.params = instance.params  # the model's parameters, other data
        backward_once(found, model, batch)
        for key, value in numpy_grads(found, batch).items():
            expected[key] = expected.get(key, 0) + value
    for key, parameter in model.named_parameters():
        got = parameter.grad.numpy()
        assert np.abs(got - expected[key]).max() <= 1e-12 * np.abs(expected[key]).max(), f"{name}: {key}"
