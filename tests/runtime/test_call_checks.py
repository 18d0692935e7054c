"""The argument checks every backend's passes share (runtime/checks.py's _checked): a call whose parameters and
data are of the kinds of one that passed before (a training loop's) has only the data's values looked at, and
rejects what a first call rejects, in the same words; NumPy's test of a float array for nan and inf is one
reduction that misses none."""

import warnings

import numpy as np
import pytest
import torch

from bptt.runtime import numpy as numpy_runtime
from bptt.tests.support.modules import module_of, segments_of

SIZES = {"d": 3, "h": 4, "q": 5}
T, B = 6, 2
MODULES = ("elman", "lstm", "elman_jordan", "elman_torch", "lstm_torch")  # labels, float targets, teacher forcing
HOOKS = ("check_params", "check_array", "check_labels")  # the checks of everything, values and all


def problem(module):
    """Parameters, xs, ys and the initial states (zeros) of a module, drawn by the module itself."""
    is_torch = module.__name__.endswith("_torch")
    rng = torch.Generator().manual_seed(0) if is_torch else np.random.default_rng(0)
    params = module.init_params(rng, **SIZES)
    xs, ys = module.random_inputs(rng, T, B, **SIZES)
    zeros = torch.zeros if is_torch else np.zeros
    initial = {
        name: zeros((B, SIZES[size]), dtype=params[module.PARAMS[0]].dtype) for name, size in module.STATES.items()
    }
    return params, xs, ys, initial


def copied(array):
    return array.clone() if isinstance(array, torch.Tensor) else array.copy()


def poisoned(array, value):
    """A copy of array with value at its last entry."""
    copy = copied(array)
    copy.reshape(-1)[-1] = value
    return copy


def spied(monkeypatch, passes):
    """The names of the full checks the passes run from now on, as they run."""
    ran = []
    for hook in HOOKS:
        original = getattr(type(passes), hook)

        def spy(*args, original=original, hook=hook, **kwargs):
            ran.append(hook)
            return original(*args, **kwargs)

        monkeypatch.setattr(type(passes), hook, staticmethod(spy))
    return ran


def bad_calls(module, params, xs, ys, initial):
    """Calls with one bad value each: nan or inf in float data and initial states, a label out of range."""
    labels = segments_of(module).spec.labels
    calls = []
    if "xs" not in labels:
        calls.append(lambda: module.loss_and_grads(params, poisoned(xs, np.nan), ys, **initial))
    bad_ys = poisoned(ys, SIZES["q"]) if "ys" in labels else poisoned(ys, np.inf)
    calls.append(lambda: module.loss_and_grads(params, xs, bad_ys, **initial))
    for name, state in initial.items():
        calls.append(
            lambda name=name, state=state: module.loss_and_grads(
                params, xs, ys, **{**initial, name: poisoned(state, -np.inf)}
            )
        )
    return calls


def message(call):
    with pytest.raises(ValueError) as raised:
        call()
    return str(raised.value)


@pytest.mark.parametrize("name", MODULES)
def test_a_call_of_kinds_that_passed_before_looks_only_at_the_values(name, monkeypatch):
    module = module_of(name)
    passes = segments_of(module)
    params, xs, ys, initial = problem(module)
    loss, grads = module.loss_and_grads(params, xs, ys, **initial)
    ran = spied(monkeypatch, passes)
    again = module.loss_and_grads({k: copied(p) for k, p in params.items()}, copied(xs), copied(ys), **initial)
    assert not ran, f"a call of known kinds ran the full checks {ran}"
    assert float(again[0]) == float(loss) and all((again[1][k] == grads[k]).all() for k in grads)
    known = [message(call) for call in bad_calls(module, params, xs, ys, initial)]
    passes.spec.calls.clear()  # what a first call with these arguments says: every check run
    first = []
    for call in bad_calls(module, params, xs, ys, initial):
        first.append(message(call))
        passes.spec.calls.clear()
    assert known == first and all("xs" in m or "ys" in m or "0 holds" in m for m in known), known
    ran.clear()
    narrower = {**initial, **{k: copied(v)[:1] for k, v in initial.items()}}
    module.loss_and_grads(params, xs[:, :1], ys[:, :1], **narrower)  # another batch size: other kinds
    assert "check_params" in ran and "check_array" in ran


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_finiteness_is_one_reduction_that_misses_no_nan_or_inf(dtype):
    finite = numpy_runtime._finite
    for size in (1, 2, 7, 33, 1001):
        for position in {0, size // 2, size - 1}:
            for value in (np.nan, np.inf, -np.inf):
                array = np.ones(size, dtype)
                array[position] = value
                assert not finite(array) and not finite(array.reshape(1, -1)[:, ::1]), (size, position, value)
                assert not finite(np.repeat(array, 2)[::2]), "a strided view"
        assert finite(np.full(size, -3.5, dtype))
    huge = np.full(5, np.finfo(dtype).max, dtype)  # finite; the sum of its squares overflows
    assert not finite(huge)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nor does the overflow warn
        assert numpy_runtime._check_array("xs", huge, ("T",), {}, dtype) is huge


def test_a_torch_call_with_data_on_another_device_is_checked_in_full():
    """A tensor's device is part of its kind: after a call on the CPU, data on another device is refused."""
    module = module_of("elman_torch")
    params, xs, ys, _ = problem(module)
    module.loss_and_grads(params, xs, ys)
    with pytest.raises(ValueError, match="xs is on device meta; expected cpu like the parameters"):
        module.loss_and_grads(params, xs.to("meta"), ys)


def test_dtype_names_are_kept_per_dtype():
    """A dtype's name, kept per dtype (runtime/common.py), is each dtype's own, whichever was named before it
    (a cache keyed wrongly, e.g. on the dtype's kind or size, would name float64 like float32, or a big-endian
    float64 like the native one), and something with an unhashable dtype attribute is still named as it prints."""
    from bptt.runtime.common import _dtype_name

    class Unhashable(list):
        def __str__(self):
            return "unhashable"

    dtypes = [np.dtype("float32"), np.dtype("float64"), np.dtype(">f8"), np.dtype("int64"), torch.float64]
    expected = ["float32", "float64", ">f8", "int64", "float64"]
    for _ in range(2):  # once to fill the cache, once from it
        assert [_dtype_name(dtype) for dtype in dtypes] == expected
        assert _dtype_name(torch.float32) == "float32" and _dtype_name(Unhashable()) == "unhashable"
