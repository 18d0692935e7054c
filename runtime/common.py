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


def _check_param_keys(spec, params):
    """params is a dict with exactly the model's parameters as keys, else ValueError saying what is missing
    or unknown."""
    names = spec.params
    if not isinstance(params, dict):
        raise ValueError(f"params must be a dict of arrays with keys {', '.join(names)}, got {type(params).__name__}")
    if params.keys() == set(names):  # the common case, in one comparison
        return
    missing = [name for name in names if name not in params]
    if missing:
        raise ValueError(f"params is missing {', '.join(missing)} (expected keys {', '.join(names)})")
    unknown = [repr(key) for key in params if key not in names]
    if unknown:
        raise ValueError(f"params has unknown keys {', '.join(unknown)} (expected keys {', '.join(names)})")


def _check_cache_keys(spec, cache):
    """cache is a dict with the keys forward returns, else ValueError."""
    if not isinstance(cache, dict):
        raise ValueError(f"cache must be the dict that forward returned, got {type(cache).__name__}")
    if set(cache) != set(spec.cache):
        got = ", ".join(map(repr, cache))
        keys = ", ".join(spec.cache)
        raise ValueError(f"cache has keys {got}; expected the keys {keys} that this model's forward returns")


def _checked(passes, params, xs, ys, states, finite, targets, finite_data=True):
    """(sizes, dtype, x, y, initial states) of a call's arguments, checked in the order of the module's signature:
    params (finite: scanned for nan and inf), xs, ys when teacher-forced, the initial states (None stays None),
    then ys if targets; finite_data: the float arrays given are scanned too (ys as targets always are). passes,
    a backend's _Passes, names its runtime's checks: check_params, check_array, check_labels, label_values (the
    labels' range), finite (one float array's scan) and place(params), the arguments saying where arrays must
    be (torch's device).

    Parameters not to be scanned and data of the kinds (_kinds) of a call's that passed before (a training
    loop's) have only the data's values looked at, each float array in one reduction; if one may be wrong,
    every check runs again, in order, to name it."""
    spec = passes.spec
    data = _arguments(spec, xs, ys, states, targets, finite_data)
    key = None
    if not finite and type(params) is dict:
        key = targets, tuple(params), _kinds([*params.values(), *[item[1] for item in data]])
    known = spec.calls.get(key)
    values = None
    if known is not None:
        sizes, dtype, place = known
        values = _values(passes, data, sizes, place)
    if values is None:
        sizes, dtype = passes.check_params(spec, params, finite)
        place = passes.place(params)
        values = [_check_data(passes, *item, sizes, dtype, place) for item in data]
        if key is not None:
            _keep(spec.calls, key, (dict(sizes), dtype, place))
    x, *rest = values
    y = rest.pop(0) if spec.forced else rest.pop() if targets else None
    return dict(sizes), dtype, x, y, tuple(rest)


def _checked_backward(passes, params, cache, d_outputs, check_finite):
    """(sizes, dtype, d_outputs) of backward's arguments, checked in the order of its signature: params, the
    cache forward returned (its keys; its arrays' shapes, dtypes and place, binding T, B and T+1; one-hot inputs
    kept as labels), d_outputs; check_finite: the parameters and d_outputs are scanned for nan and inf."""
    spec = passes.spec
    sizes, dtype = passes.check_params(spec, params, check_finite)
    place = passes.place(params)
    _check_cache_keys(spec, cache)
    first, *rest = spec.cache
    classes = spec.data["xs"] if "xs" in spec.labels else None
    _check_data(passes, f"cache['{first}']", cache[first], spec.cache[first], classes, False, sizes, dtype, place)
    sizes["T+1"] = sizes["T"] + 1
    for name in rest:
        passes.check_array(f"cache['{name}']", cache[name], spec.cache[name], sizes, dtype, False, *place)
    dims = ("T", "B", spec.data["outputs"])
    return sizes, dtype, passes.check_array("d_outputs", d_outputs, dims, sizes, dtype, check_finite, *place)


def _arguments(spec, xs, ys, states, targets, finite_data):
    """A call's data arguments in the order of the module's signature, each (name, value, its dims, the classes
    of labels or None, whether a float value is scanned)."""
    given = (xs, ys, *states)
    return [(name, given[at], *rest) for name, at, *rest in _layout(spec, targets, finite_data)]


@functools.cache
def _layout(spec, targets, finite_data):
    """_arguments' entries with the place of each value in (xs, ys, *states) for its value."""
    layout = [_data_argument(spec, "xs", 0, finite_data)]
    if spec.forced:
        layout.append(_data_argument(spec, "ys", 1, finite_data))
    layout += [(name, at, ("B", size), None, finite_data) for at, (name, size) in enumerate(spec.states.items(), 2)]
    if targets and not spec.forced:
        layout.append(_data_argument(spec, "ys", 1, True))
    return tuple(layout)


def _data_argument(spec, name, value, finite):
    """xs or ys as _arguments gives it: integer labels (of classes rows), or floats of (T, B, rows)."""
    rows = spec.data[name]
    if name in spec.labels:
        return name, value, ("T", "B"), rows, False
    return name, value, ("T", "B", rows), None, finite


def _check_data(passes, name, value, dims, classes, finite, sizes, dtype, place=()):
    """One data argument checked by the backend's runtime (binding the sizes its dims name), as the call uses it
    (an initial state not given: None)."""
    if value is None and name in passes.spec.states:
        return None
    if classes is not None:
        return passes.check_labels(name, value, sizes, classes, *place)
    return passes.check_array(name, value, dims, sizes, dtype, finite, *place)


def _anywhere(params):
    """Where arrays must be (the extra arguments of a backend's checks) for a backend whose arrays are
    anywhere: nothing to say."""
    return ()


def _check_targets(passes, ys, sizes, dtype, place=()):
    """ys checked as the loss reads them (losses' second argument)."""
    return _check_data(passes, *_data_argument(passes.spec, "ys", ys, True), sizes, dtype, place)


def _values(passes, data, sizes, place):
    """The data arguments of kinds that passed before, as the call uses them, their values looked at: labels'
    range (in sizes, which stay as they are), a float array's nan and inf in one reduction; None if one may
    hold nan or inf."""
    values = []
    for name, value, _, classes, finite in data:
        if classes is not None:
            value = passes.label_values(name, value, sizes, classes)
        elif finite and value is not None and not passes.finite(value):
            return None
        values.append(value)
    return values


def _passed_before(spec, params, finite, checked):
    """(sizes, dtype) that checked(spec, params, finite) gives, at once for parameters of the kinds (keys, and
    each one's, _kinds) a call passed before, unless their values are to be scanned."""
    kinds = None
    if type(params) is dict and not finite:
        kinds = tuple(params), _kinds(params.values())
        if kinds in spec.passed:
            sizes, dtype = spec.passed[kinds]
            return dict(sizes), dtype
    sizes, dtype = checked(spec, params, finite)
    if kinds is not None:
        _keep(spec.passed, kinds, (sizes, dtype))
    return dict(sizes), dtype


def _kinds(arrays):
    """What the checks read of each array but its values: its type, dtype, shape and device (None for what has
    none: the checks reject what has no dtype or shape)."""
    return tuple(
        [(type(a), getattr(a, "dtype", None), getattr(a, "shape", None), getattr(a, "device", None)) for a in arrays]
    )


def _keep(kept, key, value):
    """kept[key] = value, in a dict of at most 16 entries (a loop passes few kinds of arguments)."""
    if len(kept) >= 16:
        kept.clear()
    kept[key] = value


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
    for name, (stacked, start, stop) in views.items():
        if stacked in work:
            work[name] = work[stacked][..., _extent(start, sizes) : _extent(stop, sizes)]
    return work


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
