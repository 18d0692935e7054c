"""A generated NumPy module's forward pass as the check runs it: hundreds of times on arrays of the same kinds,
where its argument checks (runtime/checks.py) and fresh work arrays cost more than the maths of a small model.

The module's public forward checks its arguments, then runs its _PASSES.forward (the generated maths) into fresh
arrays. The first call of a kind (module, shapes, dtype) runs both: the public forward, and the same maths into
work arrays kept for the kind. Only if the two agree bit for bit (which they do, the maths being the same, unless
the public forward is not a plain shell of its _PASSES: a test's wrapper, a framework's module) are later calls of
that kind run the second way, into the kept arrays; otherwise, and for a module without _PASSES (one of groups of
steps, a framework's), every call runs the public forward. The check's arrays are its own, of the kinds checked at
the first call: what the public forward would check again is their shapes and dtypes, and that they hold no nan
or inf (the check's perturbed entries are finite numbers). A batch of sets (app/verify/batched.py) may give the
vector parameters a row per sample, or a matrix one per sample: _rowed_arrays says how that is run and checked."""

import threading

import numpy as np

from bptt.app.verify import trusted_groups
from bptt.app.verify.sets import AGREEMENT

LIMIT = 64  # kinds kept per thread; beyond, all are dropped (a check uses a few)
BUDGET = 64 * 2**20  # bytes of work arrays kept per thread; beyond, all are dropped
_THREAD = threading.local()


def forward(module, params, data, initial, cache=True):
    """(outputs, cache) of module.forward(params, *data, **initial): in arrays kept for the next call of this kind,
    so valid until then, if trusted (the cache None if not asked for, when that saves gathering it). Vector
    parameters given a row per sample (per_sample): see _rowed_arrays."""
    passes = getattr(module, "_PASSES", None)
    if passes is None:
        if per_sample(module, params):
            raise ValueError(f"{named(module)}: a row per sample of its vectors needs its NumPy maths")
        return _grouped(module, params, data, initial)
    kinds = _THREAD.__dict__.setdefault("kinds", {})
    key = (module, passes, *[(value.shape, value.dtype) for value in data])
    key += (*[getattr(value, "shape", None) for value in initial.values()], *[value.shape for value in params.values()])
    if key not in kinds:
        held = sum([sum([a.nbytes for a in kept[1].values()]) for kept in kinds.values() if kept is not None])
        if len(kinds) >= LIMIT or held > BUDGET:
            kinds.clear()
        if per_sample(module, params):
            kinds[key] = _rowed_arrays(module, passes, params, data, initial)
        else:
            kinds[key], public = _tried(module, passes, params, data, initial)
            return public
    kept = kinds[key]
    if kept is None:
        return module.forward(params, *data, **initial)
    sizes, work, axis = kept
    passes.forward(params, sizes, *data, *_states(module, initial, axis), work)
    return _run(passes, data[0], work, axis, cache)


def _grouped(module, params, data, initial):
    """module.forward's (outputs, cache), by its groups of steps remembering their last calls (trusted_groups.py) if
    they gave the public forward's bit for bit at the first call of this kind; else (and for a module of no groups,
    or of fed targets) by the public forward."""
    composed = getattr(module, "_SWEEPS", None)
    if composed is None or len(data) != 1 or list(initial) != list(composed.spec.states):
        return module.forward(params, *data, **initial)
    groups = _THREAD.__dict__.setdefault("groups", {})
    key = (module, composed, data[0].shape, data[0].dtype, *[getattr(v, "shape", None) for v in initial.values()])
    key += tuple((name, value.shape, value.dtype) for name, value in params.items())
    if key not in groups:
        if len(groups) >= LIMIT:
            groups.clear()
        public, remembered = module.forward(params, *data, **initial), trusted_groups.remembering(composed)
        same = _same_run(public, *trusted_groups.forward(remembered, params, data[0], initial))
        groups[key] = remembered if same else None
        return public
    if groups[key] is None:
        return module.forward(params, *data, **initial)
    return trusted_groups.forward(groups[key], params, data[0], initial)


def named(module):
    """How a message names a module: its __name__ (an imported module's, and check_backend.Framework's, the torch or
    JAX module's it shows), else its type's (a wrapper of no name): any module object the check runs, never an
    AttributeError in place of the message."""
    return getattr(module, "__name__", None) or type(module).__name__


def per_sample(module, params):
    """The parameters given one per sample: a vector (B, n) where the module's SHAPES says (n,), a matrix (m, n, B)
    where it says (m, n) (its transpose, as the maths reads it, then (B, n, m): a matrix product's stack)."""
    return [name for name, value in params.items() if value.ndim > len(module.SHAPES[name])]


def matrices(module, params):
    """The matrices given one per sample (per_sample)."""
    return [name for name in per_sample(module, params) if len(module.SHAPES[name]) > 1]


def tiled(module, params, count):
    """params for a batch of count batches side by side: the parameters given one per sample, repeated count
    times along their samples' axis."""
    rowed, stacked = per_sample(module, params), matrices(module, params)
    return {
        key: np.concatenate([value] * count, axis=-1 if key in stacked else 0) if key in rowed else value
        for key, value in params.items()
    }


def _first_sample(module, params):
    """params with the first sample's value of each parameter given one per sample."""
    rowed, stacked = per_sample(module, params), matrices(module, params)
    return {
        name: (value[..., 0] if name in stacked else value[0]) if name in rowed else value
        for name, value in params.items()
    }


def _states(module, initial, axis):
    """The initial states in the module's order; with an axis of one after the batch's if axis."""
    return [initial[name][:, None] if axis else initial[name] for name in module.STATES]


def _run(passes, x, work, axis, cache=True):
    """(outputs, cache) of a forward pass into work (the cache None if not asked for); without the work arrays' axis
    of one after the batch's, if axis (a matrix per sample: each sample's step a stack of one-row matrix products)."""
    outputs, gathered = work[passes.spec.output], passes.cache(x, work) if cache else None
    if not axis:
        return outputs, gathered
    if gathered is not None:
        gathered = {name: value if value is x else _squeezed(value) for name, value in gathered.items()}
    return _squeezed(outputs), gathered


def _squeezed(array):
    """A (steps, B, 1, ...) work array without its axis of one."""
    return array.reshape(array.shape[:2] + array.shape[3:])


def _rowed_arrays(module, passes, params, data, initial):
    """(sizes, work arrays, axis) of the module's maths with the parameters per_sample names given one per sample
    (each sample's own b, say): where the maths reads a vector elementwise along the units, a (B, n) one broadcasts
    as the sample's row; the arrays of no step and sample that change with them (b + beta, W^T) get one per sample
    too. A matrix per sample (axis): every array of the batch gets an axis of one after the batch's, so that a
    sample's matrix product is one of a stack's (the maths must take it by np.matmul). Checked: every sample at the
    first sample's values gives the public forward's outputs and cache bit for bit (with the axis, to AGREEMENT of
    each array's largest: a stack's products round otherwise), else ValueError, as for a module whose maths refuse
    them; that the samples keep apart, by the caller (app/verify/batched.py)."""
    if list(initial) != list(module.STATES) or any(value is None for value in initial.values()):
        raise ValueError(f"{named(module)}: a row per sample of its vectors needs every initial state")
    rowed, axis = per_sample(module, params), bool(matrices(module, params))
    first = _first_sample(module, params)
    public = module.forward(first, *data, **initial)
    sizes, dtype = passes.check_params(passes.spec, first, False)
    sizes.update(T=data[0].shape[0], B=data[0].shape[1])
    table = {name: _with_axis(dims) if axis else dims for name, dims in passes.forward_work.items()}
    work = passes.arrays(table, sizes["T"], sizes["B"], sizes, dtype, first_steps=True)
    states = _states(module, initial, axis)
    for name in _from_vectors(passes, first, rowed, sizes, (*data, *states), work):
        work[name] = np.empty((sizes["B"], *work[name].shape), work[name].dtype)
    alike = {name: np.broadcast_to(_sample_axis(module, name, first[name]), params[name].shape) for name in rowed}
    passes.forward({**params, **alike}, sizes, *data, *states, work)
    if not _same_run(public, *_run(passes, data[0], work, axis), AGREEMENT if axis else 0):
        raise ValueError(f"{named(module)}: its public forward is not its maths' plain shell")
    return sizes, work, axis


def _with_axis(dims):
    """A work array's dims with an axis of one after the batch's, if it has one."""
    return tuple(part for dim in dims for part in ((dim, "1") if dim == "B" else (dim,)))


def _sample_axis(module, name, value):
    """One sample's value of a parameter, with the axis its samples' stack has (first for a vector, last else)."""
    return value[..., None] if len(module.SHAPES[name]) > 1 else value


def _from_vectors(passes, params, rowed, sizes, arguments, work):
    """The work arrays of no step and sample whose values change when the vectors rowed change."""
    fixed = [name for name, dims in passes.forward_work.items() if not {"T", "T+1", "B"} & set(dims)]
    shift = np.random.default_rng(0)
    runs = []
    for values in (
        params,
        {**params, **{name: params[name] + shift.standard_normal(params[name].shape) for name in rowed}},
    ):
        passes.forward(values, sizes, *arguments, work)
        runs.append({name: work[name].copy() for name in fixed})
    return [name for name in fixed if not np.array_equal(runs[0][name], runs[1][name])]


def _tried(module, passes, params, data, initial):
    """((sizes, work arrays, False: no axis) if the module's maths, run into them, give its public forward's outputs
    and cache bit for bit, else None; what the public forward returned)."""
    public = outputs, cache = module.forward(params, *data, **initial)
    if list(initial) != list(module.STATES) or any(value is None for value in initial.values()):
        return None, public
    sizes, dtype = passes.check_params(passes.spec, params, False)
    sizes.update(T=data[0].shape[0], B=data[0].shape[1])
    work = passes.forward_arrays(sizes["T"], sizes["B"], sizes, dtype)
    passes.forward(params, sizes, *data, *initial.values(), work)
    if not _same_run(public, *_run(passes, data[0], work, False)):
        return None, public
    return (sizes, work, False), public


def _same_run(public, outputs, cache, within=0):
    """Whether (outputs, cache) are the public forward's, bit for bit (or each array within this fraction of its
    largest entry)."""
    same = _identical(public[0], outputs, within) and public[1].keys() == cache.keys()
    return same and all(_identical(public[1][key], cache[key], within) for key in cache)


def _identical(a, b, within=0):
    """Whether two arrays hold the same numbers of the same dtype and shape, bit for bit (nan never is), or each
    within this fraction of a's largest entry."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(np.all(a == b) if not within else np.all(np.abs(a - b) <= within * np.abs(a).max()))
