"""The checks of a module of a model with reverse-time states (sweeps.py): a call's arguments checked once, on
the whole model's, before any group runs, in the order of its signature and the user's names (checks.py's, over the
model's _Spec), and backward's cache: its keys (each state once, each group's other arrays under "sweep<k>.", the
lengths once), its arrays' shapes and dtypes, and its lengths (another call's: the states not carried past each
sequence's end)."""

from bptt.runtime.checks import _check_data, _checked, _checked_backward
from bptt.runtime.common import _extent


def _checked_call(sweeps, params, xs, ys, states, lengths, at, finite):
    """(x, the lengths, checked) of a call's arguments, checked once on the whole model's before any group runs,
    in the order of its signature and the user's names (checks.py's _checked): params (finite: scanned for nan
    and inf), xs, the initial states, ys if given (loss_and_grads's, the steps its loss reads)."""
    padding = sweeps.padding(lengths, xs)
    read = sweeps.read_padding(padding, at, xs) if ys is not None else padding
    x = _checked(sweeps.model_passes(), params, padding.zeroed(xs), read.zeroed(ys), states, finite, ys is not None)[2]
    return x, padding.lengths


def _own_keys(sweeps, k):
    """The keys of group k's cache that the model's cache holds under its prefix (the states: under their own
    names; the lengths: once)."""
    passes = sweeps.sweeps[k].passes
    states = {name.removesuffix("0") for name in passes.spec.states}
    return tuple(key for key in passes.spec.cache if key not in states)


def _cache_keys(sweeps):
    """The keys forward's cache holds (beside the lengths, if given)."""
    own = (f"sweep{k + 1}.{key}" for k in range(len(sweeps.sweeps)) for key in _own_keys(sweeps, k))
    return (*sweeps.spec.cache, *own)


def _checked_cache(sweeps, params, cache, d_outputs, check_finite):
    """(each group's cache, the lengths) of backward's arguments, checked once on the whole model's before any
    group runs, in the order of its signature and the user's names: params, the cache (its keys; the model's
    arrays' shapes and dtypes, checks.py's _checked_backward, then each group's own, its stacked input's rows
    the sum of what it stacks), d_outputs; check_finite: the parameters and d_outputs scanned for nan and inf."""
    if not isinstance(cache, dict):
        raise ValueError(f"cache must be the dict that forward returned, got {type(cache).__name__}")
    keys = _cache_keys(sweeps)
    if set(cache) - {"lengths"} != set(keys):
        got = ", ".join(map(repr, cache))
        raise ValueError(f"cache has keys {got}; expected the keys {', '.join(keys)} that this model's forward returns")
    model, first = sweeps.model_passes(), next(iter(sweeps.spec.cache))
    padding = sweeps.padding(cache.get("lengths"), cache[first])
    mine = {key: cache[key] for key in sweeps.spec.cache}
    sizes, dtype, _ = _checked_backward(model, params, mine, padding.zeroed(d_outputs), check_finite)
    if padding.lengths is not None:
        _check_carried(sweeps, cache, padding.lengths)
    place, exposed = model.place(params), {name: dim for sweep in sweeps.sweeps for name, dim in sweep.exposes}
    parts = []
    for k, sweep in enumerate(sweeps.sweeps):
        spec = sweep.passes.spec
        stacked = ([sweeps.spec.data["xs"]] if sweep.reads_input else []) + [exposed[name] for name in sweep.side]
        own = dict(sizes, **{spec.data["xs"]: _extent(" + ".join(stacked), sizes)})
        first, mine = next(iter(spec.cache)), _own_keys(sweeps, k)
        part = {key: cache[key] for key in spec.cache if key not in mine}  # its states: the model's
        for key in mine:
            classes = spec.data["xs"] if key == first and "xs" in spec.labels else None
            name = f"sweep{k + 1}.{key}"
            part[key] = _check_data(
                model, f"cache['{name}']", cache[name], spec.cache[key], classes, False, own, dtype, place
            )
        parts.append(part if padding.lengths is None else {**part, "lengths": padding.lengths})
    return parts, padding.lengths


def _check_carried(sweeps, cache, lengths):
    """ValueError if the cache's lengths are another call's: forward carries each state unchanged past its
    sequence's last step, so that its value at step T is its value at step lengths[b] (one step each)."""
    for name in sweeps.spec.states:
        state = cache[name.removesuffix("0")]
        last, kept = state[-1], sweeps.at_steps(state, lengths)
        if not sweeps.holds(((last == kept) | ((last != last) & (kept != kept))).all()):  # nan equals nan
            raise ValueError(
                f"cache['lengths'] is another call's: cache['{name.removesuffix('0')}'] is not carried unchanged "
                "past each sequence's last step, as the forward pass of these lengths carries it"
            )
