"""The bounded-memory backward pass every backend runs: the schedule's actions (schedule.py) carried out
with a model's own forward and backward passes over segments of steps, which its generated module hands over
as its _Passes (numpy_passes.py, torch_passes.py, jax_passes.py): its spec, segment_forward(params, sizes,
dtype, x, y, states) -> (outputs, cache), segment_loss(outputs, y, T) -> (the segment's share of the loss,
dL/doutputs), segment_backward(truncation, keep, params, sizes, cache, d_outputs, following) -> gradients,
states_at(cache, step), steps(array, a, b) -> array[a:b] (numpy and torch slice; JAX's is one compiled slice for
every a) and checkpoint_bytes(sizes, B, itemsize, ages). Framework-free. y: the targets
(teacher forcing reads them). Only _forward_kept's chunks of the first forward pass may take more memory
than a stored step of the schedule allows there: the Function's outputs are all kept anyway."""

from bptt.runtime.schedule import _budget, _capacities, _schedule, _segments


def _checkpointed(
    model,
    truncation,
    keep,
    params,
    sizes,
    dtype,
    x,
    y,
    states,
    checkpoints,
    itemsize,
    d_outputs=None,
    kept=None,
    counts=None,
):
    """(loss, gradients) of loss_and_grads in the memory `checkpoints` allows: kept states where the schedule
    keeps them, each segment run forward (storing what its backward pass reads), its loss, then backward.
    keep: the truncation's weights for all T steps (None: none); y: the targets. Given d_outputs (an
    autograd Function's backward), the loss is not computed and kept holds the states its forward pass kept
    (_forward_kept): the schedule's first forward pass is not run again. counts (lengths=): each step's and
    sample's divisor of the loss, (T, B), which segment_loss takes in place of T."""
    T = x.shape[0]
    actions = _checkpoint_actions(model, truncation, sizes, x.shape[1], itemsize, checkpoints, T)
    if kept is None:
        kept, start = {0: states}, 0
    else:
        kept, start = dict(kept), len(_sweep(actions))
    reached, following, totals, loss = None, {}, None, 0
    for action in actions[start:]:
        kind, a = action[0], action[1]
        if kind == "advance":
            reached = (action[2], _advance(model, params, sizes, dtype, x, y, kept[a], a, action[2], action[3]))
        elif kind == "keep":
            kept[a] = reached[1]
        elif kind == "free":
            del kept[a]
        else:
            b = action[2]
            initial = kept[a] if a in kept else reached[1]
            y_part = _steps(model, y, a, b)
            outputs, cache = model.segment_forward(params, sizes, dtype, model.steps(x, a, b), y_part, initial)
            if d_outputs is None:
                divisor = T if counts is None else model.steps(counts, a, b)
                part_loss, d_part = model.segment_loss(outputs, y_part, divisor)
                loss = loss + part_loss
            else:
                d_part = model.steps(d_outputs, a, b)
            part = model.segment_backward(
                truncation, _kept_weights(model, keep, a, b), params, sizes, cache, d_part, following
            )
            totals = _summed(model.spec, totals, part, a == 0)
    return loss, totals


def _checkpoint_actions(model, truncation, sizes, B, itemsize, checkpoints, T):
    """The schedule for T steps in the memory `checkpoints` allows (ValueError in one line if it cannot be)."""
    state, forward_step, backward_step = model.checkpoint_bytes(sizes, B, itemsize, truncation.ages)
    return _schedule(T, _capacities(*_budget(checkpoints, state, forward_step + backward_step), T))


def _sweep(actions):
    """The schedule's first forward pass: its actions before the first backward."""
    first = next(k for k, action in enumerate(actions) if action[0] == "backward")
    return actions[:first]


def _forward_kept(model, truncation, params, sizes, dtype, x, y, states, checkpoints, itemsize, parts=None):
    """(the outputs of every step, in parts of consecutive steps; the states the schedule's first forward pass
    keeps or reaches, by step): the forward pass of an autograd Function whose backward is _checkpointed.
    parts: where to append each part (a list if None; torch's copies each into one tensor as it comes)."""
    T = x.shape[0]
    sweep = _sweep(_checkpoint_actions(model, truncation, sizes, x.shape[1], itemsize, checkpoints, T))
    wanted = {action[2] for action in sweep if action[0] == "advance"}
    chunk = next((action[3] for action in sweep if action[0] == "advance"), T)
    kept, parts, a = {0: states}, [] if parts is None else parts, 0
    for stop in sorted(wanted | {T}):
        while a < stop:
            n = min(chunk, stop - a)
            x_part, y_part = model.steps(x, a, a + n), _steps(model, y, a, a + n)
            outputs, cache = model.segment_forward(params, sizes, dtype, x_part, y_part, states)
            parts.append(outputs)
            states, a = model.states_at(cache, n), a + n
        if a in wanted:
            kept[a] = states
    return parts, kept


def _advance(model, params, sizes, dtype, x, y, states, a, b, chunk):
    """The states at step b from those at a: the forward pass over at most chunk steps at a time, nothing kept."""
    while a < b:
        n = min(chunk, b - a)
        x_part, y_part = model.steps(x, a, a + n), _steps(model, y, a, a + n)
        states = model.states_at(model.segment_forward(params, sizes, dtype, x_part, y_part, states)[1], n)
        a += n
    return states


def _segmented(model, truncation, keep, params, sizes, cache, d_outputs, checkpoints, itemsize):
    """The gradients of backward, given the whole forward cache, in segments whose backward arrays fit in
    the memory `checkpoints` allows (nothing is recomputed: the cache holds every step)."""
    T, B = d_outputs.shape[0], d_outputs.shape[1]
    step = model.checkpoint_bytes(sizes, B, itemsize, truncation.ages)[2]
    budget, _, step = _budget(checkpoints, step, step)
    steps = budget // step
    following, totals = {}, None
    for _, a, b in _segments(T, steps):
        # steps a+1..b of the arrays of steps 1..T (the input's, a JAX module's values), a..b of those of 0..T
        part_cache = {
            name: model.steps(array, a, b if model.spec.cache[name][0] == "T" else b + 1)
            for name, array in cache.items()
        }
        weights, d_part = _kept_weights(model, keep, a, b), model.steps(d_outputs, a, b)
        part = model.segment_backward(truncation, weights, params, sizes, part_cache, d_part, following)
        totals = _summed(model.spec, totals, part, a == 0)
    return totals


def _sliced(array, a, b):
    """Steps a+1..b of an array of steps: a NumPy or torch module's steps (_Passes.steps)."""
    return array[a:b]


def _steps(model, y, a, b):
    """Steps a+1..b of the targets (None: an autograd Function's forward pass has none)."""
    return None if y is None else model.steps(y, a, b)


def _kept_weights(model, keep, a, b):
    """keep for the steps a+1..b of a segment and the flow from step b+1 into b (None: no truncation)."""
    return None if keep is None else model.steps(keep, a, b + 1)


def _summed(spec, totals, part, first):
    """The gradients of the segments so far plus those of one more; the initial states' from the first
    segment only (steps 1.., the last to run)."""
    part = {key: value for key, value in part.items() if first or key not in spec.states}
    if totals is None:
        return part
    for key, value in part.items():
        totals[key] = totals[key] + value if key in totals else value
    return totals
