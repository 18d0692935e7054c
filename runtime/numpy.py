"""The NumPy backend's runtime: what a generated NumPy module runs besides its model's maths (argument checks,
truncation weights, the helpers its printed code calls); numpy_passes.py runs its passes around them.
common.py holds what every backend shares; a model's facts come in as its _Spec."""

import functools
import math

import numpy as np

from bptt.runtime.checks import _check_param_keys, _passed_before
from bptt.runtime.common import _check_g_max, _check_shape, _check_sizes, _extent, _param_sizes, _params_dtype
from bptt.runtime.options import _Truncation


def clip_grads(grads, g_max):
    """Rescale grads by min(1, g_max / ||g||), ||g|| the global norm over all arrays."""
    g_max = _check_g_max(g_max)
    norm = np.sqrt(sum(float(np.sum(np.square(g))) for g in grads.values()))
    scale = min(1.0, g_max / norm) if norm > 0 else 1.0
    return {name: g * np.asarray(scale, dtype=g.dtype) for name, g in grads.items()}


def _truncation(truncate, rng):
    """The Truncation of a truncate argument (options.py), rng checked for random truncation."""
    truncation = _Truncation.of(truncate)
    if truncation.randomized:
        _check_rng(rng)
    return truncation


def _check_rng(rng):
    """rng for random truncation: a NumPy Generator, else ValueError."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"truncate=('random', pi) needs rng=np.random.default_rng(seed), got rng={rng!r}")


def _keep_weights(truncation, T, rng, dtype):
    """keep[t]: the weight of the gradient flowing from step t+1 back into step t, t = 0..T-1."""
    keep = np.ones(T, dtype)
    k = pi = truncation.value
    if truncation.chunked:
        keep[k::k] = 0  # h_k, h_2k, ... enter the next step detached
    elif truncation.randomized:
        keep[:] = (rng.random(T) < pi) / pi  # xi_{t+1}: 0 with probability 1 - pi, else 1/pi
    return keep


def _truncation_weights(truncation, T, rng, dtype):
    """keep (_keep_weights) when chunks or random truncation weight the flows, else None."""
    return _keep_weights(truncation, T, rng, dtype) if truncation.weighted else None


def _init_params(spec, rng, dtype, sizes):
    """Random parameters of the spec's shapes: weights ~ N(0, 1/fan_in), vectors ~ N(0, 0.01)."""
    dtype = _check_dtype(dtype)
    sizes = _check_sizes(spec, sizes)
    params = {}
    for name, dims in spec.shapes.items():
        shape = tuple(_extent(dim, sizes) for dim in dims)
        scale = 0.1 if len(shape) == 1 else 1 / np.sqrt(shape[1])
        params[name] = (scale * rng.standard_normal(shape)).astype(dtype)
    return params


def _age(flow):
    """The flow from step t+1 arrives one step older; the window drops the oldest age."""
    older = np.zeros_like(flow)
    older[1:] = flow[:-1]
    return older


def _directions(v, rows):
    """M_dot v for every direction M_dot = E_ij of a (rows, cols) matrix, (i, j) row-major:
    shape (rows * cols, B, rows) for v of shape (B, cols)."""
    cols = v.shape[-1]
    out = np.zeros((rows, cols) + v.shape[:-1] + (rows,), v.dtype)
    for i in range(rows):
        out[i, ..., i] = np.moveaxis(v, -1, 0)
    return out.reshape((rows * cols,) + v.shape[:-1] + (rows,))


def _transposed_directions(v, cols):
    """M_dot^T v for every direction M_dot = E_ij of a (rows, cols) matrix, (i, j) row-major:
    shape (rows * cols, B, cols) for v of shape (B, rows)."""
    rows = v.shape[-1]
    out = np.zeros((rows, cols) + v.shape[:-1] + (cols,), v.dtype)
    for j in range(cols):
        out[:, j, ..., j] = np.moveaxis(v, -1, 0)
    return out.reshape((rows * cols,) + v.shape[:-1] + (cols,))


def _sigmoid(z, out=None):
    """1 / (1 + exp(-z)) as 1 / (1 + e) for z >= 0 and e / (1 + e) for z < 0, e = exp(-|z|): it never overflows, and
    keeps its relative accuracy where it is tiny (log(sigmoid(z)) reads it; (1 + tanh(z / 2)) / 2 rounds to 0 below
    z = -37); into out if given (out may be z). Both at once, exp(min(z, 0)) / (1 + e): a multiply with where= to
    pick the negative z costs ten times the other calls together."""
    top = np.minimum(z, 0.0)
    e = np.abs(z)
    np.negative(e, out=e)
    np.exp(e, out=e)
    out = np.add(e, 1.0, out=out)
    np.exp(top, out=top)
    return np.divide(top, out, out=out)


_IN_ORDER = 8  # NumPy reduces a last axis shorter than this entry after entry (its pairwise sum starts at 8)


def _reduce_rows(ufunc, z):
    """ufunc.reduce(z, axis=-1, keepdims=True) bit for bit, faster for a short last axis (a model's classes): NumPy
    reduces fewer than _IN_ORDER entries in order, one after the other, as this loop of whole-array calls does, but
    its loop per row costs more than the arithmetic."""
    n = z.shape[-1]
    if not 0 < n < _IN_ORDER:
        return ufunc.reduce(z, axis=-1, keepdims=True)
    out = z[..., :1].copy()
    for i in range(1, n):
        ufunc(out, z[..., i : i + 1], out=out)
    return out


def _logsumexp(z):
    top = _reduce_rows(np.maximum, z)
    return (top + np.log(_reduce_rows(np.add, np.exp(z - top))))[..., 0]


def _softmax(z, out=None):
    out = np.subtract(z, _reduce_rows(np.maximum, z), out=out)
    np.exp(out, out=out)
    out /= _reduce_rows(np.add, out)
    return out


def _onehot(labels, classes, dtype, out=None):
    if out is None:
        out = np.zeros(labels.shape + (classes,), dtype)
    else:
        out.fill(0)
    np.put_along_axis(out, labels[..., None], 1, axis=-1)
    return out


def _softmax_cross_entropy(s, y, count):
    """sum_t -log softmax(s_t)[y_t] / count, and s replaced by its gradient (softmax(s_t) - onehot(y_t)) / count:
    one exp of the logits, in place, on the (T*B, classes) rows. count: a number, or one per step and sample
    (T, B) (lengths=: inf at a padded step, which then weighs exactly nothing)."""
    rows = s.reshape(-1, s.shape[-1])
    picks = np.arange(rows.shape[0]) * rows.shape[1] + y.reshape(-1)  # the labels' places in s.flat
    np.subtract(rows, _reduce_rows(np.maximum, rows), out=rows)
    picked = rows.reshape(-1)[picks]
    np.exp(rows, out=rows)
    total = _reduce_rows(np.add, rows)
    if np.ndim(count):
        share = 1 / count.reshape(-1)
        np.multiply(rows, share[:, None] / total, out=rows)
        rows.reshape(-1)[picks] -= share
        return ((np.log(total[:, 0]) - picked) * share).sum()
    loss = (np.log(total[:, 0]) - picked).sum() / count
    np.multiply(rows, 1 / (total * count), out=rows)
    rows.reshape(-1)[picks] -= 1 / count
    return loss


def _squared_error(s, y, count):
    """sum_t 1/2 ||s_t - y_t||^2 / count, and s replaced by its gradient (s_t - y_t) / count, in place;
    count as for _softmax_cross_entropy."""
    np.subtract(s, y, out=s)
    if np.ndim(count):
        share = 1 / count[..., None]
        loss = (0.5 * np.square(s).sum(axis=-1) * share[..., 0]).sum()
        np.multiply(s, share, out=s)
        return loss
    loss = (0.5 * np.square(s).sum(axis=-1)).sum() / count  # l_t first: its rounding is that of losses()
    np.divide(s, count, out=s)
    return loss


@functools.cache
def _unit_means(n, dtype):
    """A read-only vector of n entries 1/n: a mean over the last axis is one product with it (np.dot, a BLAS call,
    where a reduction over that axis and a scaling cost several times as much)."""
    means = np.full(n, 1 / n, dtype)
    means.setflags(write=False)
    return means


def _norm_adjoint(g, hat, sigma, centred=True, out=None):
    """A norm's Jacobian times g (derive/norm_adjoint.py): (g - mean(g) - hat mean(hat * g)) / sigma, without mean(g)
    for an RMS norm (centred False); O(n) per row, no n x n matrix, the means over the last axis; into out if given
    (never g itself). Each mean is one product with _unit_means, the rest in place: no temporary the size of g."""
    means = _unit_means(g.shape[-1], g.dtype)
    out = np.multiply(hat, g, out=out)
    np.multiply(hat, np.dot(out, means)[..., None], out=out)
    if centred:
        out += np.dot(g, means)[..., None]
    np.subtract(g, out, out=out)
    return np.divide(out, sigma, out=out)


def _placed(like, *blocks):
    """The gradient of a parameter read by blocks (of a sequence's value read by row slices): zero, each (index,
    value) block added in at its index; a value with leading axes its block lacks (an aged adjoint's ages)
    widens the result to them."""
    out = np.zeros_like(like)
    for index, value in blocks:
        extra = np.ndim(value) - out[index].ndim
        if extra > 0:
            out = np.zeros(np.shape(value)[:extra] + out.shape, out.dtype) + out
        out[index] += value
    return out


def _scatter_columns(values, labels, columns):
    """sum_t values_t onehot(labels_t)^T: each row of values added into column labels of the result."""
    out = np.zeros((columns, values.shape[-1]), values.dtype)
    np.add.at(out, labels.reshape(-1), values.reshape(-1, values.shape[-1]))
    return out.T


def _check_dtype(dtype):
    """dtype as a NumPy dtype: float32 or float64, the dtypes the modules compute in."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


def _blamed(spec, params, loss, grads):
    """(loss, grads) of loss_and_grads, whose parameters it did not scan: if the loss or an initial state's
    gradient is not finite, a parameter holding nan or inf is named (ValueError); else it was an overflow.
    One reduction of each gradient says it (_finite: nan or inf anywhere makes it so; an overflow of finite
    gradients only costs the scan, which then finds nothing)."""
    if not (math.isfinite(loss) and all([_finite(grads[name]) for name in spec.states])):
        _check_params(spec, params)
    return loss, grads


def _check_params(spec, params, finite=True):
    """The sizes implied by the parameters' shapes, and their common dtype; finite: no nan or inf in them.

    If one parameter disagrees with all the others, the error names it. Parameters of the same kinds as
    a call's before (keys, types, dtypes, shapes) pass at once, their values scanned by one reduction if finite."""
    return _passed_before(spec, params, finite, _checked_params, _all_finite)


def _checked_params(spec, params, finite):
    """_check_params, every check made."""
    _check_param_keys(spec, params)
    dtype = _params_dtype(spec, params, _check_array)
    arrays = [params[name] for name in spec.params]
    for name, array in zip(spec.params, arrays, strict=True):
        dims = spec.shapes[name]
        good = isinstance(array, np.ndarray) and array.dtype == dtype and array.ndim == len(dims)
        if not (good and array.size):
            _check_array(f"params['{name}']", array, dims, {}, dtype, finite)  # says what is wrong
    # all at once; only if one may not be finite is each looked at, entry by entry
    if finite and not _all_finite(arrays):
        for name in spec.params:
            _check_array(f"params['{name}']", params[name], spec.shapes[name], {}, dtype)  # names the first bad entry
    return _param_sizes(spec, params), dtype


_JOINED = 65_536  # entries up to which arrays are joined to be looked at by one call (beyond, copying costs more)


def _all_finite(arrays):
    """True if every entry of the arrays (of one dtype) is finite; False if one may not be (_finite). Small
    arrays are joined and looked at once."""
    if len(arrays) > 1 and sum([array.size for array in arrays]) <= _JOINED:
        arrays = [np.concatenate(arrays, axis=None)]
    return all([_finite(array) for array in arrays])


def _finite(array):
    """True if every entry of a float array is finite; False if one may not be. One reduction, the sum of the
    squares (BLAS's dot, faster than np.isfinite's pass, with no temporary and no warning), which nan or inf in
    the array makes nan or inf (a sum of finite squares that overflows says False: the caller looks entry by entry)."""
    return math.isfinite(np.vdot(array, array))


def _check_array(name, array, dims, sizes, dtype, finite=True):
    """array with the named dims (binding sizes not yet known) and the given dtype;
    if finite, a float array must hold no nan or inf."""
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{name} must be a NumPy array, got {type(array).__name__}")
    _check_shape(name, array.shape, dims, sizes)
    if array.dtype != dtype:
        raise ValueError(f"{name} has dtype {array.dtype}; expected {np.dtype(dtype)} like the parameters")
    if finite and array.dtype.kind == "f" and not _finite(array) and not np.isfinite(array).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(f"{name} holds {array[index]} at index {index}; expected finite numbers")
    sizes.update(zip(dims, array.shape, strict=True))
    return array


def _check_labels(name, labels, sizes, classes):
    """Integer labels of shape (T, B), each in range(sizes[classes]), of any integer dtype; returned as intp
    (what indexing takes: a uint64 index array is refused)."""
    if not isinstance(labels, np.ndarray) or labels.dtype.kind not in "iu":  # signed or unsigned integers
        raise ValueError(
            f"{name} must be an integer NumPy array of labels, got {getattr(labels, 'dtype', type(labels).__name__)}"
        )
    _check_array(name, labels, ("T", "B"), sizes, labels.dtype)
    return _label_values(name, labels, sizes, classes)


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}  # the unsigned integers by their bytes


def _label_values(name, labels, sizes, classes):
    """Integer labels (of any integer dtype) each in range(sizes[classes]), as intp."""
    unsigned = labels.view(_UNSIGNED[labels.itemsize])  # a negative label reads as huge: one pass says it
    if np.maximum.reduce(unsigned, None) >= sizes[classes]:
        bad = (labels < 0) | (labels >= sizes[classes])
        value = labels[bad].flat[0]
        raise ValueError(
            f"{name} holds label {value}; labels must be in range({sizes[classes]}) ({classes}={sizes[classes]})"
        )
    return labels.astype(np.intp, copy=False)
