"""The torch runtime's checks of a call's tensors (runtime/torch.py holds the rest): parameters, arrays and labels,
saying what the NumPy runtime's checks say, in the same words, about torch tensors."""

import math

import torch

from bptt.runtime.checks import _check_param_keys, _passed_before
from bptt.runtime.common import _check_shape, _dtype_name, _param_sizes, _params_dtype


def _check_dtype(dtype):
    """dtype, a torch dtype: float32 or float64, the dtypes the modules compute in."""
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return dtype


def _blamed(spec, params, loss, grads):
    """(loss, grads) of loss_and_grads, whose parameters it did not scan: if the loss or an initial state's
    gradient is not finite, a parameter holding nan or inf is named (ValueError); else it was an overflow.
    One sum says it, read once: nan or inf anywhere makes it so (a sum of finite gradients that overflows
    only costs the scan, which then finds nothing)."""
    total = loss.detach()
    for name in spec.states:
        total = total + grads[name].sum()
    if not math.isfinite(total.item()):
        _check_params(spec, params)
    return loss, grads


def _check_params(spec, params, finite=True):
    """The sizes implied by the parameters' shapes, their common dtype and device; finite: no nan or inf.

    If one parameter disagrees with all the others, the error names it. Parameters of the same kinds as
    a call's before (keys, types, dtypes, devices, shapes) pass at once, their values scanned by one sum if finite."""
    return _passed_before(spec, params, finite, _checked_params, _all_finite)


def _checked_params(spec, params, finite):
    """_check_params, every check made."""
    _check_param_keys(spec, params)
    dtype = _params_dtype(spec, params, _check_array)
    device = next(params[name].device for name in spec.params if getattr(params[name], "dtype", None) == dtype)
    for name in spec.params:
        _check_array(f"params['{name}']", params[name], spec.shapes[name], {}, dtype, finite, device)
    return _param_sizes(spec, params), dtype


def _check_array(name, array, dims, sizes, dtype, finite=True, device=None):
    """array with the named dims (binding sizes not yet known), the given dtype and device;
    if finite, a float array must hold no nan or inf."""
    if not isinstance(array, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(array).__name__}")
    shape = tuple(array.shape)
    _check_shape(name, shape, dims, sizes)
    if array.dtype != dtype:
        raise ValueError(
            f"{name} has dtype {_dtype_name(array.dtype)}; expected {_dtype_name(dtype)} like the parameters"
        )
    if device is not None and array.device != device:
        raise ValueError(f"{name} is on device {array.device}; expected {device} like the parameters")
    if finite and array.is_floating_point() and not _finite(array):
        index = tuple(int(i) for i in torch.nonzero(~torch.isfinite(array))[0])
        raise ValueError(f"{name} holds {array[index].item()} at index {index}; expected finite numbers")
    sizes.update(zip(dims, shape, strict=True))
    return array


def _all_finite(arrays):
    """Whether no array holds nan or inf, False if one may: the sum of their sums, read once (as _finite)."""
    return math.isfinite(sum([array.sum() for array in arrays]).item())


def _finite(array):
    """Whether array holds no nan or inf. Its sum says so first (nan or inf in it makes the sum so; a sum of
    finite entries that overflows only costs the look entry by entry): one reduction, no temporary, where
    torch.isfinite takes several kernels (12x the time on 31,000 numbers), read as a Python number. Entry by
    entry, a million at a time: torch.isfinite of a whole long sequence would take temporaries several times
    its size."""
    if math.isfinite(array.sum().item()):
        return True
    return all(bool(torch.isfinite(part).all()) for part in array.reshape(-1).split(1 << 20))


def _check_labels(name, labels, sizes, classes, device=None):
    """Integer labels of shape (T, B), each in range(sizes[classes]), of any integer dtype; returned as int64
    (what indexing takes, and comparisons: torch has none for uint16, uint32, uint64)."""
    if (
        not isinstance(labels, torch.Tensor)
        or labels.is_floating_point()
        or labels.is_complex()
        or labels.dtype == torch.bool
    ):
        kind = _dtype_name(labels.dtype) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"{name} must be an integer torch tensor of labels, got {kind}")
    _check_array(name, labels, ("T", "B"), sizes, labels.dtype, False, device)
    return _label_values(name, labels, sizes, classes)


def _label_values(name, labels, sizes, classes):
    """Integer labels (of any integer dtype) each in range(sizes[classes]), as int64."""
    wide = labels.long()  # a uint64 label of 2**63 or more wraps below 0: out of range either way
    low, high = torch.aminmax(wide)  # one pass
    if low.item() < 0 or high.item() >= sizes[classes]:
        value = wide[(wide < 0) | (wide >= sizes[classes])][0].item()
        if labels.dtype == torch.uint64 and value < 0:
            value += 2**64  # the label as given, before .long() wrapped it
        raise ValueError(
            f"{name} holds label {value}; labels must be in range({sizes[classes]}) ({classes}={sizes[classes]})"
        )
    return wide
