"""checkpoints= for a model with reverse-time states (sweeps.py), framework-free. Every group's kept states live from
its forward pass until its backward, so the groups share the budget: slots split evenly (the first groups one more),
a byte budget in proportion to each group's stored step (its forward and backward arrays of one step), so that each
group stores as many steps; each needs one stored step at least, else a one-line ValueError naming the smallest
budget that works. Each group runs as a forward-only module's checkpointed pass (checkpoints.py) in its share: its
forward pass keeps its schedule's states only; the values it hands to later groups are kept whole, as xs is, since
they are those groups' inputs (as is each group's input, stacked and reversed as it runs); the last group's loss is
taken segment by segment; backward runs each group's schedule, last group first, from the states it kept, its side
reads' gradients (one per step) becoming the d_outputs of the groups that computed them."""

from dataclasses import dataclass

from bptt.runtime.checkpoints import _checkpointed, _forward_kept, _segmented
from bptt.runtime.checks import _checked_backward
from bptt.runtime.common import _extent, _param_sizes
from bptt.runtime.options import _NO_TRUNCATION, _Checkpoints


def _shares(checkpoints, steps):
    """Each group's _Checkpoints of a call's checkpoints, the groups' stored steps in bytes given (steps)."""
    bound, count = _Checkpoints.of(checkpoints), len(steps)
    if bound.bytes is None:
        if bound.slots < count:
            raise ValueError(
                f"checkpoints={bound.slots} is too small for this model's {count} groups of steps (reverse-time "
                f"states): each stores a step at least, so give checkpoints={count} or more"
            )
        return tuple(_Checkpoints(slots=bound.slots // count + (k < bound.slots % count)) for k in range(count))
    need = sum(steps)
    if bound.bytes < need:
        raise ValueError(
            f"checkpoints={bound.spelled!r} holds no step of each of this model's {count} groups of steps "
            f"(reverse-time states): one stored step of each takes {' + '.join(map(str, steps))} bytes here, so give "
            f"checkpoints='{need}B' or more"
        )
    shares = (bound.bytes * step // need for step in steps)
    return tuple(_Checkpoints(bytes=share, spelled=f"{share}B") for share in shares)


@dataclass
class _Run:
    """What a group's backward reads: its index, its passes' arguments (params, sizes, dtype, its input x as it ran,
    y, its initial states) and the states its forward pass kept (None: none yet)."""

    k: int
    params: dict
    sizes: dict
    dtype: object
    x: object
    y: object
    initial: tuple
    kept: dict | None = None

    def handed(self):
        """The kept states, given up: the schedule then frees each as it goes."""
        kept, self.kept = self.kept, None
        return kept


class _SideSet:
    """A group's passes for the checkpoint driver, whose segments' gradients of its side reads (one per step, not
    summed over segments: the keys neither a parameter nor an initial state) are set aside in parts, the last
    segment's first; joined() joins them."""

    def __init__(self, passes, composed):
        self.passes, self.composed, self.parts = passes, composed, []

    def __getattr__(self, name):
        return getattr(self.passes, name)

    def segment_backward(self, *args):
        grads, spec = self.passes.segment_backward(*args), self.passes.spec
        self.parts.append({name: grads.pop(name) for name in list(grads) if name not in (*spec.params, *spec.states)})
        return grads

    def joined(self):
        """{side read: its gradients of every step}, the parts given up."""
        parts, self.parts = self.parts[::-1], []
        names = dict.fromkeys(name for part in parts for name in part)
        return {name: self.composed.steps_joined([part.pop(name) for part in parts]) for name in names}


class _Call:
    """One checkpointed call: its arguments, checked on the whole model's (sweep_checks.py's _checked_call: xs zero at
    its padded steps), the padding of its lengths, the values its groups hand on, and the budget's shares (made once
    the first group's arguments are bound)."""

    def __init__(self, composed, params, xs, states, lengths, checkpoints):
        self.padding = composed.padding(lengths, xs)
        self.composed, self.params, self.xs, self.states = composed, params, xs, states
        lengths = self.padding.lengths
        self.steps = lengths if composed.ragged(lengths, xs.shape[0]) else None  # what a reverse group reverses by
        self.checkpoints, self.shares, self.values = _Checkpoints.of(checkpoints), None, {}

    def group(self, k, ys=None):
        """Group k's _Run: its input stacked from xs and the values before it (their padded steps zero), checked
        with the targets ys if given, reversed (ys too) if the group runs reversed."""
        composed, sweep = self.composed, self.composed.sweeps[k]
        parts = ([self.xs] if sweep.reads_input else []) + [self.values[name] for name in sweep.side]
        data = parts[0] if len(parts) == 1 else composed.stacked(parts)
        params, states = composed._params(sweep, self.params), composed._states(sweep.passes, self.states)
        sizes, dtype, x, y, initial = composed.checked(sweep.passes, params, data, ys, states)
        if sweep.reverse:
            x = composed.reversed_steps(x, self.steps)
            y = None if y is None else composed.reversed_steps(y, self.steps)
        sizes.update(T=x.shape[0], B=x.shape[1])
        if self.shares is None:
            self.shares = _shares(self.checkpoints, self.stored_steps(sizes, composed.itemsize(dtype)))
        return _Run(k, params, sizes, dtype, x, y, initial)

    def stored_steps(self, first, itemsize):
        """Each group's bytes of a stored step (its forward and backward arrays), from the first group's sizes and
        the parameters'."""
        sizes = {**_param_sizes(self.composed.spec, self.params), **first}
        groups = zip(self.composed.sweeps, _group_sizes(self.composed, sizes), strict=True)
        return [sum(sweep.passes.checkpoint_bytes(own, first["B"], itemsize, 1)[1:]) for sweep, own in groups]

    def kept(self, k):
        """(group k's _Run, its outputs): its forward pass keeping its schedule's states only; its outputs in the
        model's steps' order, zero at padded steps, the values later groups read taken from them."""
        composed, sweep, run = self.composed, self.composed.sweeps[k], self.group(k)
        arguments = (run.params, run.sizes, run.dtype, run.x, None, run.initial, self.shares[k])
        parts, run.kept = _forward_kept(sweep.passes, _NO_TRUNCATION, *arguments, composed.itemsize(run.dtype))
        outputs = composed.steps_joined(parts)
        if sweep.reverse:
            outputs = composed.reversed_steps(outputs, self.steps)
        outputs = self.padding.zeroed(outputs)
        for name, rows in composed._rows(sweep, self.params).items():
            self.values[name] = outputs[..., rows]
        return run, outputs

    def backward(self, run, d_outputs, counts=None):
        """(loss, the group's gradients, its side reads' gradients in the model's steps' order): its schedule from
        the states its forward pass kept, given d_outputs; or (d_outputs None) its own forward pass and its loss of
        run.y (counts: each step's and sample's divisor, lengths= or at=, else None for T)."""
        composed, sweep = self.composed, self.composed.sweeps[run.k]
        if d_outputs is not None:
            d_outputs = self.padding.zeroed(d_outputs)
            d_outputs = composed.reversed_steps(d_outputs, self.steps) if sweep.reverse else d_outputs
        T, itemsize = run.x.shape[0], composed.itemsize(run.dtype)
        keep = composed.keep_weights(_NO_TRUNCATION, T, None, run.x)
        model = _SideSet(sweep.passes, composed)
        arguments = (run.params, run.sizes, run.dtype, run.x, run.y, run.initial, self.shares[run.k], itemsize)
        loss, grads = _checkpointed(
            model, _NO_TRUNCATION, keep, *arguments, d_outputs=d_outputs, kept=run.handed(), counts=counts
        )
        grads.pop(sweep.placement, None)
        side = model.joined()  # a side read nothing flows back into has none
        if sweep.reverse:
            side = {name: composed.reversed_steps(d_value, self.steps) for name, d_value in side.items()}
        return loss, grads, side

    def groups_backward(self, runs, d_outputs, flowing, grads):
        """grads with those of each run's backward added, the last run first (popped: its kept states freed as
        its schedule goes); flowing: the gradients of the values handed on so far, by name."""
        composed = self.composed
        while runs:
            run = runs.pop()
            sweep = composed.sweeps[run.k]
            d_out = d_outputs
            if sweep.exposes:  # a value no later group reads: zero
                rows = composed._rows(sweep, self.params)
                shape = tuple(run.x.shape[:2]) + (max(r.stop for r in rows.values()),)
                blank = composed.zeros(shape, run.x)
                d_out = composed.stacked([flowing.pop(name, blank[..., rows[name]]) for name in rows])
            _, found, side = self.backward(run, d_out)
            _added(flowing, side)
            _added(grads, found)
        return {key: grads[key] for key in (*composed.spec.params, *composed.spec.states)}


def _group_sizes(composed, sizes):
    """Each group's sizes: the model's; its input's rows, those of xs (if it reads them) and of the values it
    reads; its output's rows, those of the values it hands on (the last group's: the model's)."""
    rows = {name: _extent(dim, sizes) for sweep in composed.sweeps for name, dim in sweep.exposes}
    out = []
    for sweep in composed.sweeps:
        stacked = sum(rows[name] for name in sweep.side)
        stacked += _extent(composed.spec.data["xs"], sizes) if sweep.reads_input else 0
        own = {**sizes, sweep.passes.spec.data["xs"]: stacked}
        if sweep.exposes:
            own[sweep.passes.spec.data["outputs"]] = sum(rows[name] for name, _ in sweep.exposes)
        out.append(own)
    return out


def _segmented_backward(composed, passes, params, cache, d_outputs, check_finite, checkpoints):
    """A group's backward(cache, checkpoints=): its arguments checked as its backward checks them (a padded batch's
    cache zeroes d_outputs at its padded steps), then its backward arrays in segments of steps that fit in that
    memory (checkpoints.py's _segmented), nothing recomputed; its side reads' gradients of every step."""
    cache, padding = composed.cache_padding(passes.spec, cache)
    d_outputs = padding.zeroed(d_outputs) if padding else d_outputs
    sizes, dtype, d_outputs = _checked_backward(passes, params, cache, d_outputs, check_finite)
    keep = composed.keep_weights(_NO_TRUNCATION, sizes["T"], None, d_outputs)
    model, itemsize = _SideSet(passes, composed), composed.itemsize(dtype)
    grads = _segmented(model, _NO_TRUNCATION, keep, params, sizes, cache, d_outputs, checkpoints, itemsize)
    return {**grads, **model.joined()}


def _added(totals, more):
    for key, value in more.items():
        totals[key] = totals[key] + value if key in totals else value


def _checkpointed_loss_and_grads(composed, params, xs, ys, states, checkpoints, lengths, at):
    """loss_and_grads(checkpoints=...) of a model with reverse-time states: the groups before the last run forward
    keeping their schedules' states, the last group's loss and backward as a forward-only module's, then the others'
    backward from their kept states."""
    call = _Call(composed, params, xs, states, lengths, checkpoints)
    runs = [call.kept(k)[0] for k in range(len(composed.sweeps) - 1)]
    read = composed.read_padding(call.padding, at, xs)
    runs.append(call.group(len(composed.sweeps) - 1, read.zeroed(ys)))
    call.values.clear()  # each group's input holds what it reads of them
    counts = None if read.valid is None else read.counts(composed.spec.mean, runs[-1].dtype)
    if counts is not None and composed.sweeps[-1].reverse:
        counts = composed.reversed_steps(counts, call.steps)
    loss, grads, flowing = call.backward(runs.pop(), None, counts)
    return loss, call.groups_backward(runs, None, flowing, grads)


def _kept_forward(composed, params, xs, states, lengths, checkpoints):
    """(the outputs, (the call, its runs)): every group run forward keeping its schedule's states only, what
    _kept_backward reads (an autograd Function's forward)."""
    call = _Call(composed, params, xs, states, lengths, checkpoints)
    runs, outputs = [], None
    for k in range(len(composed.sweeps)):
        run, outputs = call.kept(k)
        runs.append(run)
    call.values.clear()  # each group's input holds what it reads of them
    return outputs, (call, runs)


def _kept_backward(kept, d_outputs):
    """The gradients of every parameter and initial state, given dL/doutputs, from _kept_forward's (call, runs)."""
    call, runs = kept
    return call.groups_backward(runs, d_outputs, {}, {})
