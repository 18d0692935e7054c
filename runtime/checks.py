"""A call's argument checks, framework-free, every backend's passes share (over the backend's own checks of an
array, which its _Passes names): params, the data and the states in the order of the module's signature, the
cache backward takes; and what the checks of kinds of arguments that passed before need not look at again."""

import functools

from bptt.runtime.common import _keep


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

    Parameters and data of the kinds (_kinds) of a call's that passed before (a training loop's, finite
    differences') have only their values looked at: the parameters' if finite, in one scan (all_finite), the
    data's each float array in one reduction (finite, label_values; passes without them, JAX's, check every call
    in full); if one may be wrong, every check runs again, in order, to name it."""
    spec = passes.spec
    data = _arguments(spec, xs, ys, states, targets, finite_data)
    key = None
    if type(params) is dict and hasattr(passes, "finite"):
        key = targets, tuple(params), _kinds([*params.values(), *[item[1] for item in data]])
    known = spec.calls.get(key)
    values = None
    if known is not None and (not finite or passes.all_finite([params[name] for name in spec.params])):
        sizes, dtype, place = known
        values = _values(passes, data, sizes, place)
    if values is None:
        sizes, dtype = passes.check_params(spec, params, finite)
        place, bound = passes.place(params), dict(sizes)
        values = [_check_bound(passes, bound, item, sizes, dtype, place) for item in data]
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


def _check_bound(passes, bound, item, sizes, dtype, place):
    """_check_data of one data argument; if its shape disagrees with a size the parameters bound (`bound`), the
    message says which parameter bound it: where only one parameter holds a size the data holds too (W_x's d and
    xs'), either may be the wrong one."""
    try:
        return _check_data(passes, *item, sizes, dtype, place)
    except ValueError as error:
        _, value, dims, classes = item[:4]
        shape = getattr(value, "shape", None)
        if classes is not None or shape is None or len(shape) != len(dims):
            raise
        for dim, n in zip(dims, shape, strict=True):
            if bound.get(dim, n) != n:
                spec = passes.spec
                setter = next(p for p in spec.params if any(d.rpartition("*")[2] == dim for d in spec.shapes[p]))
                raise ValueError(f"{error}, {dim} as in params['{setter}']") from None
        raise


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


def _passed_before(spec, params, finite, checked, all_finite=None):
    """(sizes, dtype) that checked(spec, params, finite) gives, at once for parameters of the kinds (keys, and
    each one's, _kinds) a call passed before, their values scanned if finite by all_finite (a list of the
    arrays -> False if one may hold nan or inf: then every check runs, to name it), if given."""
    kinds = None
    if type(params) is dict and (not finite or all_finite):
        kinds = tuple(params), _kinds(params.values())
        known = spec.passed.get(kinds)
        if known is not None and (not finite or all_finite([params[name] for name in spec.params])):
            sizes, dtype = known
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
