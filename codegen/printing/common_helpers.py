"""The helpers every backend shares, framework-free. A generated module carries the definitions its code
calls and those they call, from its backend's helpers file first (a name defined there wins), then from
this one; printing/helpers.py splits both by Python's parser (it never imports them).

These read names each generated module defines for itself: module.py.j2's constants, and the backend's
checks (_check_array, _check_labels, _check_rng, _FLOATS). The constants stand here empty, annotated so
that the splitter never copies them; the checks are NumPy's for a linter (a module carries its own)."""

import numbers
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the backend's own, in each generated module
    from bptt.codegen.numpy.helpers import _FLOATS, _check_array, _check_labels, _check_rng

# module.py.j2 writes each generated module's own; these stand-ins are never copied (see above)
PARAMS: tuple = ()
SIZES: tuple = ()
SHAPES: dict = {}
STATES: dict = {}
CACHE: dict = {}


def _truncation(truncate, rng):
    """(mode, value) of a truncate argument, or ValueError saying what is allowed."""
    if truncate is None:
        return "full", None
    modes = ("window", "chunk", "random")
    if not (isinstance(truncate, tuple) and len(truncate) == 2 and truncate[0] in modes):
        raise ValueError(f"truncate must be None, ('window', k), ('chunk', k) or ('random', pi); got {truncate!r}")
    mode, value = truncate
    if mode != "random" and not _is_count(value):
        raise ValueError(f"truncate=('{mode}', k): k must be an integer >= 1, got {value!r}")
    if mode == "random":
        if not (_is_number(value) and 0 < value <= 1):
            raise ValueError(f"truncate=('random', pi): pi must be in (0, 1], got {value!r}")
        _check_rng(rng)
        return mode, float(value)
    return mode, int(value)  # a NumPy integer too, as a Python int


def _is_number(value):
    """A real number: a Python or NumPy int or float (a bool is not a number here)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_count(value):
    """An integer >= 1, Python's or NumPy's (a bool is not a count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def _check_theta(theta):
    """clip_grads' threshold as a float: a positive number, else ValueError."""
    if not (_is_number(theta) and theta > 0):
        raise ValueError(f"theta must be a positive number, got {theta!r}")
    return float(theta)


def _check_lengths(T, B):
    """random_inputs' T and B: positive integers, else ValueError naming the one that is not."""
    for name, value in (("T", T), ("B", B)):
        if not _is_count(value):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _dtype_name(dtype):
    """A dtype as the messages name it: float64."""
    return str(dtype)


def _params_dtype(params):
    """The dtype most parameters have (the first one's if tied), so that a parameter whose dtype differs
    from the others' is the one an error names; ValueError naming a parameter if it is no float dtype."""
    dtypes = [getattr(params[name], "dtype", None) for name in PARAMS]
    dtype = dtypes[0] if dtypes.count(dtypes[0]) == len(dtypes) else max(dtypes, key=dtypes.count)
    name = PARAMS[dtypes.index(dtype)]
    if dtype not in _FLOATS:
        _check_array(f"params['{name}']", params[name], SHAPES[name], {}, dtype, finite=False)  # not an array?
        raise ValueError(f"params['{name}'] has dtype {_dtype_name(dtype)}; expected float32 or float64")
    return dtype


def _float_dtype(name, array):
    """The dtype of an array that must be float32 or float64 (the outputs given to losses); ValueError
    naming it otherwise. None for what has no dtype (_check_array then says what it must be)."""
    dtype = getattr(array, "dtype", None)
    if dtype is not None and dtype not in _FLOATS:
        raise ValueError(f"{name} has dtype {_dtype_name(dtype)}; expected float32 or float64")
    return dtype


def _check_sizes(sizes):
    missing = [name for name in SIZES if name not in sizes]
    unknown = sorted(set(sizes) - set(SIZES))
    if missing or unknown:
        raise ValueError(f"sizes must be exactly {', '.join(SIZES)}; missing {missing}, unknown {unknown}")
    for name, value in sizes.items():
        if not _is_count(value):
            raise ValueError(f"size {name} must be a positive integer, got {value!r}")
    return sizes


def _check_param_keys(params):
    """params is a dict with exactly the keys PARAMS, else ValueError saying what is missing or unknown."""
    if not isinstance(params, dict):
        raise ValueError(f"params must be a dict of arrays with keys {', '.join(PARAMS)}, got {type(params).__name__}")
    if params.keys() == set(PARAMS):  # the common case, in one comparison
        return
    missing = [name for name in PARAMS if name not in params]
    if missing:
        raise ValueError(f"params is missing {', '.join(missing)} (expected keys {', '.join(PARAMS)})")
    unknown = [repr(key) for key in params if key not in PARAMS]
    if unknown:
        raise ValueError(f"params has unknown keys {', '.join(unknown)} (expected keys {', '.join(PARAMS)})")


_BOUND = {}  # parameters' shapes -> the sizes they bind: a training loop passes the same shapes every call


def _param_sizes(params):
    """The sizes the parameters' shapes bind (a fresh dict); if they disagree, ValueError naming the parameter
    that disagrees with all the others if one does, else the first that disagrees with those before it."""
    shapes = tuple([tuple(params[name].shape) for name in PARAMS])
    sizes = _BOUND.get(shapes)
    if sizes is None:
        sizes = _bound_sizes(params)
        if len(_BOUND) >= 16:
            _BOUND.clear()
        _BOUND[shapes] = sizes
    return dict(sizes)


def _bound_sizes(params):
    """_param_sizes, worked out from the shapes."""
    sizes, clash = _bind_sizes(params, PARAMS)
    if clash:
        order = list(PARAMS)
        for odd in PARAMS:
            rest = [name for name in PARAMS if name != odd]
            if _bind_sizes(params, rest)[1] is None:
                order = rest + [odd]  # the others agree: check them first, then blame the odd one
                break
        sizes, clash = _bind_sizes(params, order)
        name, dim, other = clash
        expected = ", ".join(f"{d}={_extent(d, sizes)}" if d.rpartition("*")[2] in sizes else d for d in SHAPES[name])
        got = tuple(params[name].shape)
        raise ValueError(f"params['{name}'] has shape {got}; expected ({expected}), {dim} as in params['{other}']")
    return sizes


def _bind_sizes(params, names):
    """(sizes, None) if the named parameters' shapes agree; else (the sizes bound before the first
    parameter that disagrees, (that parameter, the size it disagrees on, the parameter that set it))."""
    sizes, setter = {}, {}
    for name in names:
        before = dict(sizes)
        for dim, n in zip(SHAPES[name], params[name].shape, strict=True):
            count, _, size = dim.rpartition("*")  # "4*h": a parameter of stacked blocks, 4 blocks of h rows
            count = int(count or 1)
            if n % count or sizes.setdefault(size, n // count) != n // count:
                return before, (name, size, setter.get(size, name))
            setter.setdefault(size, name)
    return sizes, None


def _extent(dim, sizes):
    """The length of a dimension named by a size ("h") or a multiple of one ("4*h")."""
    count, _, size = dim.rpartition("*")
    return int(count or 1) * sizes[size]


def _check_cache(cache, sizes, dtype, classes=None):
    """Check that cache is what forward returns for this model and these sizes: its keys,
    its arrays' shapes and dtypes; bind T, B and T+1. classes: the size of one-hot inputs,
    which the cache keeps as integer labels."""
    if not isinstance(cache, dict):
        raise ValueError(f"cache must be the dict that forward returned, got {type(cache).__name__}")
    if set(cache) != set(CACHE):
        got = ", ".join(map(repr, cache))
        raise ValueError(f"cache has keys {got}; expected the keys {', '.join(CACHE)} that this model's forward returns")
    first, *rest = CACHE
    if classes is None:
        _check_array(f"cache['{first}']", cache[first], CACHE[first], sizes, dtype, finite=False)
    else:
        _check_labels(f"cache['{first}']", cache[first], sizes, classes)
    sizes["T+1"] = sizes["T"] + 1
    for name in rest:
        _check_array(f"cache['{name}']", cache[name], CACHE[name], sizes, dtype, finite=False)


def _check_shape(name, shape, dims, sizes):
    """shape (a tuple) has the named dims, those in sizes of their known lengths, and no zero."""
    if len(shape) != len(dims) or any(dim in sizes and sizes[dim] != n for dim, n in zip(dims, shape, strict=True)):
        expected = ", ".join(f"{dim}={sizes[dim]}" if dim in sizes else dim for dim in dims)
        raise ValueError(f"{name} has shape {shape}; expected ({expected})")
    if 0 in shape:
        raise ValueError(f"{name} has shape {shape}; every dimension must be at least 1")
