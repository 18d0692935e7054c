"""The runtime every backend shares, framework-free: a model's facts (Spec), counts,
and the sizes a model's parameters bind. A backend's runtime (numpy.py, ...) adds what needs its framework."""

import functools
from dataclasses import dataclass, field

from bptt.runtime.options import _is_count, _is_number


@dataclass(frozen=True, eq=False)
class _Spec:
    """What the runtime reads of one model, the constants its generated module writes: the parameters
    (PARAMS), the sizes (SIZES), each parameter's dims (SHAPES), the initial states and their sizes (STATES),
    what forward keeps for backward (CACHE), the rows of a step of xs, ys and the outputs (DATA), which of
    those hold integer labels (LABELS: their rows are the classes), whether the loss is a mean over the
    steps (MEAN), the states teacher forcing sets (TEACHER_FORCED), and the outputs' name in the maths."""

    params: tuple
    sizes: tuple
    shapes: dict
    states: dict
    cache: dict
    mean: bool = False
    forced: tuple = ()
    data: dict = field(default_factory=dict)
    labels: tuple = ()
    output: str = ""
    bound: dict = field(default_factory=dict, repr=False)  # parameters' shapes -> the sizes they bind
    # what the checks of everything but the values bound, of arguments of the kinds (_kinds) that passed them:
    # a training loop passes the same kinds of arrays every call. The parameters' -> (sizes, dtype);
    # a whole call's -> (sizes, dtype, place)
    passed: dict = field(default_factory=dict, repr=False)
    calls: dict = field(default_factory=dict, repr=False)


def _check_g_max(g_max):
    """clip_grads' threshold as a float: a positive number, else ValueError."""
    if not (_is_number(g_max) and g_max > 0):
        raise ValueError(f"g_max must be a positive number, got {g_max!r}")
    return float(g_max)


def _check_lengths(T, B):
    """random_inputs' T and B: positive integers, else ValueError naming the one that is not."""
    for name, value in (("T", T), ("B", B)):
        if not _is_count(value):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


_FLOATS = ("float32", "float64")  # the dtypes the modules compute in, as _dtype_name names them


def _dtype_name(dtype):
    """A dtype as the messages name it, NumPy's, torch's and JAX's alike: float64."""
    try:
        return _named_dtype(dtype)
    except TypeError:  # an unhashable dtype attribute of something that is no array: named as it prints
        return str(dtype).removeprefix("torch.")


@functools.lru_cache(maxsize=64)
def _named_dtype(dtype):
    """_dtype_name, kept per dtype: NumPy prints a dtype in Python (about 10 us), and every call checks one."""
    return str(dtype).removeprefix("torch.")


def _params_dtype(spec, params, check_array):
    """The dtype most parameters have (_common_dtype); ValueError naming a parameter if it is no float dtype
    (check_array, the backend's, says first if it is no array)."""
    dtype, name = _common_dtype(spec, params)
    if _dtype_name(dtype) not in _FLOATS:
        check_array(f"params['{name}']", params[name], spec.shapes[name], {}, dtype, finite=False)  # not an array?
        raise ValueError(f"params['{name}'] has dtype {_dtype_name(dtype)}; expected float32 or float64")
    return dtype


def _float_dtype(name, array):
    """The dtype of an array that must be float32 or float64 (the outputs given to losses); ValueError
    naming it otherwise. None for what has no dtype (_check_array then says what it must be)."""
    dtype = getattr(array, "dtype", None)
    if dtype is not None and _dtype_name(dtype) not in _FLOATS:
        raise ValueError(f"{name} has dtype {_dtype_name(dtype)}; expected float32 or float64")
    return dtype


def _common_dtype(spec, params):
    """(the dtype most parameters have, the first one's if tied; the first parameter that has it), so that a
    parameter whose dtype differs from the others' is the one an error names."""
    dtypes = [getattr(params[name], "dtype", None) for name in spec.params]
    dtype = dtypes[0] if dtypes.count(dtypes[0]) == len(dtypes) else max(dtypes, key=dtypes.count)
    return dtype, spec.params[dtypes.index(dtype)]


def _check_sizes(spec, sizes):
    """sizes (init_params' and random_inputs' keywords): exactly the model's sizes, each a positive integer."""
    missing = [name for name in spec.sizes if name not in sizes]
    unknown = sorted(set(sizes) - set(spec.sizes))
    if missing or unknown:
        raise ValueError(f"sizes must be exactly {', '.join(spec.sizes)}; missing {missing}, unknown {unknown}")
    for name, value in sizes.items():
        if not _is_count(value):
            raise ValueError(f"size {name} must be a positive integer, got {value!r}")
    return sizes


def _param_sizes(spec, params):
    """The sizes the parameters' shapes bind (a fresh dict); if they disagree, ValueError naming the parameter
    that disagrees with all the others if one does, else the first that disagrees with those before it.
    A training loop passes the same shapes every call: the last few bindings are kept."""
    shapes = tuple([tuple(params[name].shape) for name in spec.params])
    sizes = spec.bound.get(shapes)
    if sizes is None:
        sizes = _bound_sizes(spec, params)
        _keep(spec.bound, shapes, sizes)
    return dict(sizes)


def _bound_sizes(spec, params):
    """_param_sizes, worked out from the shapes."""
    sizes, clash = _bind_sizes(spec, params, spec.params)
    if clash:
        order = list(spec.params)
        for odd in spec.params:
            rest = [name for name in spec.params if name != odd]
            if _bind_sizes(spec, params, rest)[1] is None:
                order = rest + [odd]  # the others agree: check them first, then blame the odd one
                break
        sizes, clash = _bind_sizes(spec, params, order)
        name, dim, other = clash
        dims = spec.shapes[name]
        expected = ", ".join(f"{d}={_extent(d, sizes)}" if d.rpartition("*")[2] in sizes else d for d in dims)
        got = tuple(params[name].shape)
        raise ValueError(f"params['{name}'] has shape {got}; expected ({expected}), {dim} as in params['{other}']")
    return sizes


def _bind_sizes(spec, params, names):
    """(sizes, None) if the named parameters' shapes agree; else (the sizes bound before the first
    parameter that disagrees, (that parameter, the size it disagrees on, the parameter that set it))."""
    sizes, setter = {}, {}
    for name in names:
        before = dict(sizes)
        for dim, n in zip(spec.shapes[name], params[name].shape, strict=True):
            count, _, size = dim.rpartition("*")  # "4*h": a parameter of stacked blocks, 4 blocks of h rows
            count = int(count or 1)
            if n % count or sizes.setdefault(size, n // count) != n // count:
                return before, (name, size, setter.get(size, name))
            setter.setdefault(size, name)
    return sizes, None


def _extent(dim, sizes):
    """The length of a dimension named by a size ("h"), a multiple of one ("4*h"), or a sum of such terms
    ("q + 6*h", "T+1", "T*B"), the sizes' lengths in sizes."""
    total = 0
    for count, names in _terms(dim):
        for name in names:
            count *= sizes[name]
        total += count
    return total


def _step_bytes(step_rows, sizes, B, itemsize, ages, factor=1):
    """(bytes of a kept state, of one step of the forward pass's arrays, of the backward pass's) of a module's
    rows of a step (a kept state's, a forward step's, a backward step's, a window age's), a step's times
    factor: what the framework holds beside them (XLA's temporaries, measured)."""
    state, forward, backward, aged = [_extent(rows, sizes) for rows in step_rows]
    row = B * itemsize  # one sample's row of one step
    backward += ages * aged if ages > 1 else 0
    return state * row, int(factor * forward * row), int(factor * backward * row)


def _viewed(work, views, sizes):
    """work with the views of its stacked arrays: each (the stacked array, first row, end row) of views."""
    for name, stacked, start, stop in _view_rows(views, work, sizes):
        work[name] = work[stacked][..., start:stop]
    return work


def _view_rows(views, arrays, sizes):
    """(name, stacked array, first row, end row) of each view of views whose stacked array is among arrays' names or
    an earlier view's, its rows at these sizes."""
    rows, made = [], set(arrays)
    for name, (stacked, start, stop) in views.items():
        if stacked in made:
            rows.append((name, stacked, _extent(start, sizes), _extent(stop, sizes)))
            made.add(name)
    return rows


@functools.cache
def _terms(dim):
    """A dimension as its terms, each (a count, the sizes it multiplies): "q + 6*h" -> ((1, ("q",)), (6, ("h",)))."""
    terms = []
    for term in dim.split("+"):
        factors = [factor.strip() for factor in term.split("*")]
        count = 1
        for factor in factors:
            count *= int(factor) if factor.isdigit() else 1
        terms.append((count, tuple(factor for factor in factors if not factor.isdigit())))
    return tuple(terms)


def _check_shape(name, shape, dims, sizes):
    """shape (a tuple) has the named dims, those in sizes of their known lengths, and no zero."""
    if len(shape) != len(dims) or any(dim in sizes and sizes[dim] != n for dim, n in zip(dims, shape, strict=True)):
        expected = ", ".join(f"{dim}={sizes[dim]}" if dim in sizes else dim for dim in dims)
        raise ValueError(f"{name} has shape {shape}; expected ({expected})")
    if 0 in shape:
        raise ValueError(f"{name} has shape {shape}; every dimension must be at least 1")


def _keep(kept, key, value):
    """kept[key] = value, in a dict of at most 16 entries (a loop passes few kinds of arguments)."""
    if len(kept) >= 16:
        kept.clear()
    kept[key] = value
