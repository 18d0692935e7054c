"""A generated NumPy module's forward pass as the check runs it: hundreds of times on arrays of the same kinds,
where its argument checks (runtime/checks.py) and fresh work arrays cost more than the maths of a small model.

The module's public forward checks its arguments, then runs its _PASSES.forward (the generated maths) into fresh
arrays. The first call of a kind (module, shapes, dtype) runs both: the public forward, and the same maths into
work arrays kept for the kind. Only if the two agree bit for bit (which they do, the maths being the same, unless
the public forward is not a plain shell of its _PASSES: a test's wrapper, a framework's module) are later calls of
that kind run the second way, into the kept arrays; otherwise, and for a module without _PASSES (one of groups of
steps, a framework's), every call runs the public forward. The check's arrays are its own, of the kinds checked at
the first call: what the public forward would check again is their shapes and dtypes, and that they hold no nan
or inf (the check's perturbed entries are finite numbers)."""

import threading

import numpy as np

LIMIT = 64  # kinds kept per thread; beyond, all are dropped (a check uses a few)
BUDGET = 64 * 2**20  # bytes of work arrays kept per thread; beyond, all are dropped
_THREAD = threading.local()


def forward(module, params, data, initial):
    """(outputs, cache) of module.forward(params, *data, **initial): in arrays kept for the next call of this kind,
    so valid until then, if trusted."""
    passes = getattr(module, "_PASSES", None)
    if passes is None:
        return module.forward(params, *data, **initial)
    kinds = _THREAD.__dict__.setdefault("kinds", {})
    key = (module, passes, *[(value.shape, value.dtype) for value in data])
    key += (*[getattr(value, "shape", None) for value in initial.values()], *[value.shape for value in params.values()])
    if key not in kinds:
        held = sum([sum([a.nbytes for a in kept[1].values()]) for kept in kinds.values() if kept is not None])
        if len(kinds) >= LIMIT or held > BUDGET:
            kinds.clear()
        kinds[key], public = _tried(module, passes, params, data, initial)
        return public
    kept = kinds[key]
    if kept is None:
        return module.forward(params, *data, **initial)
    sizes, work = kept
    passes.forward(params, sizes, *data, *[initial[name] for name in module.STATES], work)
    return work[passes.spec.output], passes.cache(data[0], work)


def _tried(module, passes, params, data, initial):
    """(sizes and work arrays if the module's maths, run into them, give its public forward's outputs and cache bit
    for bit, else None; what the public forward returned)."""
    public = outputs, cache = module.forward(params, *data, **initial)
    if list(initial) != list(module.STATES) or any(value is None for value in initial.values()):
        return None, public
    sizes, dtype = passes.check_params(passes.spec, params, False)
    sizes.update(T=data[0].shape[0], B=data[0].shape[1])
    work = passes.forward_arrays(sizes["T"], sizes["B"], sizes, dtype)
    passes.forward(params, sizes, *data, *initial.values(), work)
    same = _identical(outputs, work[passes.spec.output])
    mine = passes.cache(data[0], work)
    if not same or cache.keys() != mine.keys() or not all(_identical(cache[k], mine[k]) for k in cache):
        return None, public
    return (sizes, work), public


def _identical(a, b):
    """Whether two arrays hold the same numbers of the same dtype and shape, bit for bit (nan never is)."""
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.all(a == b))
