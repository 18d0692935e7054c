"""A generated NumPy module's passes, run around its maths (_forward, _adjoints, _window_adjoints, _gradients):
its public functions' argument checks, in the order their signatures give the arguments; the work arrays,
made from the module's tables of their dims and kept per thread (the workspace); the loss; and the
segments the checkpoint driver (checkpoints.py) runs.

Workspace: loss_and_grads and backward keep their work arrays (states, adjoints, slopes, scratch) from one
call to the next and reuse them while T, B, the sizes and the dtype stay the same; other shapes replace
them. Each thread has its own, so calls from several threads are safe; free_workspace() releases the calling
thread's. What forward returns and every gradient are fresh arrays, never overwritten later."""

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from bptt.runtime.checkpoints import _checkpointed, _segmented, _sliced
from bptt.runtime.checks import _anywhere, _check_targets, _checked, _checked_backward
from bptt.runtime.common import (
    _check_lengths,
    _check_sizes,
    _extent,
    _float_dtype,
    _keep,
    _Spec,
    _step_bytes,
    _view_rows,
)
from bptt.runtime.numpy import (
    _all_finite,
    _blamed,
    _check_array,
    _check_dtype,
    _check_labels,
    _check_params,
    _finite,
    _label_values,
    _truncation,
    _truncation_weights,
)
from bptt.runtime.numpy_padding import _cache_padding, _data_padding, _Padding, _read_padding
from bptt.runtime.options import _Checkpoints

_THREAD = threading.local()  # each thread's work arrays
# the functions a generated NumPy module defines: its public shells, each a call of its _Passes, then its maths
SHELLS = ("init_params", "random_inputs", "forward", "backward", "losses", "loss_and_grads", "forward_mode_grads")
MODULE_FUNCTIONS = (*SHELLS, "_forward", "_adjoints", "_window_adjoints", "_gradients")


def _workspace(spec, make, T, B, sizes, dtype):
    """The arrays make(T, B, sizes, dtype) returns, made on this thread's first call and kept for its later
    calls with the same T, B, sizes and dtype; a call with other shapes replaces them."""
    shapes = (T, B, tuple([sizes[name] for name in spec.sizes]), np.dtype(dtype))
    held = _THREAD.__dict__.get(make)
    if held is None or held[0] != shapes:
        _THREAD.__dict__.pop(make, None)  # the old arrays go before the new ones are made
        held = _THREAD.__dict__[make] = (shapes, make(T, B, sizes, dtype))
    return held[1]


def free_workspace():
    """Release the work arrays that loss_and_grads and backward keep for the calling thread, those of every
    generated module that imports this runtime (they are made again on the next call). Other threads' arrays
    go when their threads end."""
    _THREAD.__dict__.clear()


@dataclass(frozen=True, eq=False)
class _Passes:
    """A NumPy module's maths and the tables of its work arrays: dims as CACHE writes them, a view of a
    stacked array as (that array, its first row, its end row)."""

    spec: _Spec
    forward: Callable  # (params, sizes, x, [y,] *initial states, work): the forward pass, into work
    adjoints: Callable  # (keep, params, sizes, cache, d_outputs, work, following): the initial states' gradients
    window_adjoints: Callable  # (k, params, sizes, cache, d_outputs, work, following): the same, windowed
    gradients: Callable  # (params, sizes, cache, d_outputs, work): the parameters' gradients
    loss: Callable  # (outputs, y, count): the loss, the outputs replaced by dL/doutputs
    forward_work: dict  # name -> dims (arrays of steps 0..T start zero at step 0)
    backward_work: dict
    views: dict = field(default_factory=dict)  # name -> (stacked array, first row, end row)
    ones: tuple = ()  # the backward arrays that start as ones
    step_rows: tuple = ("0", "0", "0", "0")  # the rows of a kept state, a forward step, a backward step, a window age
    layouts: dict = field(default_factory=dict, repr=False)  # (table's id, lengths) -> (table, shapes, views)

    # the runtime's checks, which the shared ones call (checks.py's _checked)
    check_params, check_array = staticmethod(_check_params), staticmethod(_check_array)
    check_labels, label_values = staticmethod(_check_labels), staticmethod(_label_values)
    finite, all_finite, place = staticmethod(_finite), staticmethod(_all_finite), staticmethod(_anywhere)

    def random_inputs(self, rng, T, B, dtype, sizes):
        """The module's random_inputs: xs, then ys, each of the kind the model takes."""
        dtype = _check_dtype(dtype)
        sizes = _check_sizes(self.spec, sizes)
        _check_lengths(T, B)
        return tuple(self._draw(rng, T, B, dtype, sizes, name) for name in ("xs", "ys"))

    def _draw(self, rng, T, B, dtype, sizes, name):
        rows = self.spec.data[name]
        if name in self.spec.labels:
            return rng.integers(0, sizes[rows], size=(T, B))
        return rng.standard_normal((T, B, _extent(rows, sizes))).astype(dtype)

    def forward_call(self, params, xs, ys, states, lengths=None):
        """The module's forward: (outputs, cache), fresh arrays; lengths: a padded batch's (its padded xs and
        ys are read as zeros)."""
        padding = _data_padding(lengths, xs)
        xs, ys = padding.zeroed(xs), padding.zeroed(ys)
        sizes, dtype, x, y, initial = _checked(self, params, xs, ys, states, True, False)
        return padding.stopped(self.spec, *self.segment_forward(params, sizes, dtype, x, y, initial))

    def backward_call(self, params, cache, d_outputs, truncate, rng, check_finite, checkpoints):
        """The module's backward, its arguments checked; a padded batch's cache (lengths) zeroes d_outputs at
        its padded steps, so that no gradient flows through them."""
        truncation = _truncation(truncate, rng)
        cache, padding = _cache_padding(self.spec, cache)
        d_outputs = padding.zeroed(d_outputs) if padding else d_outputs
        sizes, dtype, d_outputs = _checked_backward(self, params, cache, d_outputs, check_finite)
        return self.backward(truncation, rng, params, sizes, dtype, cache, d_outputs, checkpoints)

    def loss_and_grads_call(self, params, xs, ys, states, truncate, rng, checkpoints, lengths=None, at=None):
        """The module's loss_and_grads, its arguments checked (a parameter's nan or inf: _blamed, from the result);
        lengths: a padded batch's (its padded xs and ys are read as zeros, their steps weigh nothing); at "last":
        the loss reads each sequence's last step only (the others weigh nothing, their ys unread unless forced)."""
        truncation = _truncation(truncate, rng)
        padding = _data_padding(lengths, xs)
        read = _read_padding(padding, at, xs)
        xs, ys = padding.zeroed(xs), (padding if self.spec.forced else read).zeroed(ys)
        sizes, dtype, x, y, initial = _checked(self, params, xs, ys, states, False, True)
        counts = None if read.valid is None else read.counts(self.spec.mean, dtype)
        return self.loss_and_grads(truncation, rng, params, sizes, dtype, x, y, initial, checkpoints, counts)

    def loss_inputs(self, outputs, ys, lengths=None, at=None):
        """(outputs, ys, their padding) as the module's losses takes them: float outputs (not scanned), ys in
        their dtype (zero at padded steps), the padding whose zeroed() zeroes the padded steps' losses (at "last":
        all but each sequence's last step's)."""
        sizes, rows = {}, self.spec.data["outputs"]
        dtype = _float_dtype("outputs", outputs)
        outputs = _check_array("outputs", outputs, ("T", "B", rows), sizes, dtype, finite=False)
        padding = _Padding.of(lengths, *outputs.shape[:2]).read_at(at, *outputs.shape[:2])
        return outputs, _check_targets(self, padding.zeroed(ys), sizes, outputs.dtype), padding

    def output_gradient(self, params, xs, ys, states, lengths=None, at=None):
        """(the batch-averaged loss, dL/doutputs, the forward cache, sizes, dtype): fresh arrays. lengths and at
        (forward_mode_grads', as loss_and_grads'): a padded batch's, its padded xs and ys read as zeros; the steps
        the loss does not read weigh nothing, so dL/doutputs is exactly 0 there and no tangent carried through
        them reaches a gradient."""
        padding = _data_padding(lengths, xs)
        read = _read_padding(padding, at, xs)
        xs, ys = padding.zeroed(xs), (padding if self.spec.forced else read).zeroed(ys)
        sizes, dtype, x, y, initial = _checked(self, params, xs, ys, states, True, False)
        outputs, cache = self.segment_forward(params, sizes, dtype, x, y, initial)
        dims = ("T", "B", self.spec.data["outputs"])
        y = _check_targets(self, ys, dict(zip(dims, outputs.shape, strict=True)), dtype)
        counts = outputs.shape[0] if read.valid is None else read.counts(self.spec.mean, dtype)
        loss = self.segment_loss(outputs, y, counts)[0]  # the outputs become dL/doutputs
        return loss, outputs, cache, sizes, dtype

    def arrays(self, table, T, B, sizes, dtype, first_steps=False):
        """The arrays of a table (uninitialised but ones), then the views of its stacked ones; first_steps:
        step 0 of the arrays of steps 0..T is zero (what the cache holds before the first step)."""
        shapes, views = self.layout(table, dict(sizes, T=T, B=B))
        work = {}
        for name, shape in shapes:
            work[name] = np.ones(shape, dtype) if name in self.ones else np.empty(shape, dtype)
            if first_steps and table[name][0] == "T+1":
                work[name][0] = 0
        for name, stacked, start, stop in views:
            work[name] = work[stacked][..., start:stop]
        return work

    def layout(self, table, lengths):
        """Each array's (name, shape) of a table at these lengths, and each view of its stacked arrays (name, the
        stacked array, first row, end row), worked out once for the last few lengths (a loop's calls, finite
        differences', have the same)."""
        key = id(table), tuple(lengths.items())
        kept = self.layouts.get(key)
        if kept is None or kept[0] is not table:  # the table is held with its layout: its id names no other meanwhile
            shapes = [(name, tuple([_extent(dim, lengths) for dim in dims])) for name, dims in table.items()]
            kept = table, shapes, _view_rows(self.views, table, lengths)
            _keep(self.layouts, key, kept)
        return kept[1:]

    def forward_arrays(self, T, B, sizes, dtype):
        return self.arrays(self.forward_work, T, B, sizes, dtype, first_steps=True)

    def backward_arrays(self, T, B, sizes, dtype):
        return self.arrays(self.backward_work, T, B, sizes, dtype)

    def checkpoint_bytes(self, sizes, B, itemsize, ages):
        """(bytes of a kept state, of one step of the forward pass's arrays, of the backward pass's)."""
        return _step_bytes(self.step_rows, sizes, B, itemsize, ages)

    def backward_into(self, truncation, keep, params, sizes, cache, d_outputs, work, following=None):
        """The gradients, in the arrays of work; following: as for the module's _adjoints (a segment of steps)."""
        if truncation.windowed:
            initial = self.window_adjoints(truncation.value, params, sizes, cache, d_outputs, work, following)
        else:
            initial = self.adjoints(keep, params, sizes, cache, d_outputs, work, following)
        grads = self.gradients(params, sizes, cache, d_outputs, work)
        grads.update(zip(self.spec.states, initial if len(self.spec.states) > 1 else (initial,), strict=True))
        return grads

    def cache(self, x, work):
        """What forward keeps for backward: the inputs, then the forward pass's arrays the cache names."""
        first, *rest = self.spec.cache
        return {first: x, **{name: work[name] for name in rest}}

    def backward(self, truncation, rng, params, sizes, dtype, cache, d_outputs, checkpoints=None):
        """The module's backward, its arguments checked (loss_and_grads checks its own: a forward pass that
        overflows gives a nan loss and gradients there, not an error), in this thread's workspace; or with
        checkpoints in segments of steps whose arrays fit in that memory."""
        T, B = sizes["T"], sizes["B"]
        if checkpoints is not None:
            checkpoints = _Checkpoints.of(checkpoints)  # once per call: the schedule's functions take the value
            keep = _truncation_weights(truncation, T, rng, dtype)
            return _segmented(
                self, truncation, keep, params, sizes, cache, d_outputs, checkpoints, np.dtype(dtype).itemsize
            )
        work = _workspace(self.spec, self.backward_arrays, T, B, sizes, dtype)
        keep = _truncation_weights(truncation, T, rng, dtype)
        return self.backward_into(truncation, keep, params, sizes, cache, d_outputs, work)

    def loss_and_grads(self, truncation, rng, params, sizes, dtype, x, y, initial, checkpoints, counts=None):
        """The module's loss_and_grads, its arguments checked: the forward pass in this thread's workspace,
        the loss, then backward; or in the memory checkpoints allows (_checkpointed). A parameter holding nan
        or inf is named from the result (_blamed). counts (lengths=): each step's and sample's divisor of the
        loss, inf at padded steps, whose outputs' gradients are then zero: backward, linear in them, gives
        every padded step zero gradient."""
        T, B = x.shape[0], x.shape[1]
        if checkpoints is not None:
            checkpoints = _Checkpoints.of(checkpoints)
            keep = _truncation_weights(truncation, T, rng, dtype)
            sizes.update(T=T, B=B)
            itemsize = np.dtype(dtype).itemsize
            loss, grads = _checkpointed(
                self, truncation, keep, params, sizes, dtype, x, y, initial, checkpoints, itemsize, counts=counts
            )
            return _blamed(self.spec, params, loss, grads)
        work = _workspace(self.spec, self.forward_arrays, T, B, sizes, dtype)
        self.forward(params, sizes, x, *((y,) if self.spec.forced else ()), *initial, work)
        count = (T * B if self.spec.mean else B) if counts is None else counts
        loss = self.loss(work[self.spec.output], y, count)  # outputs become dL/doutputs
        sizes.update(T=T, B=B)
        grads = self.backward(truncation, rng, params, sizes, dtype, self.cache(x, work), work[self.spec.output])
        return _blamed(self.spec, params, loss, grads)

    def segment_forward(self, params, sizes, dtype, x, y, initial):
        """(outputs, cache) of the forward pass over the steps of x from the states initial."""
        work = self.forward_arrays(x.shape[0], x.shape[1], sizes, dtype)
        self.forward(params, sizes, x, *((y,) if self.spec.forced else ()), *initial, work)
        return work[self.spec.output], self.cache(x, work)

    def segment_loss(self, outputs, y, T):
        """(the loss of a segment's steps, averaged as loss_and_grads averages over all T, dL/doutputs in place
        of the outputs); T may be the segment's steps' divisors instead (counts, lengths=)."""
        if np.ndim(T):
            return self.loss(outputs, y, T), outputs
        return self.loss(outputs, y, T * outputs.shape[1] if self.spec.mean else outputs.shape[1]), outputs

    def segment_backward(self, truncation, keep, params, sizes, cache, d_outputs, following):
        """The gradients of a segment of steps, in fresh arrays; following as for the module's _adjoints."""
        T, B = d_outputs.shape[0], d_outputs.shape[1]
        sizes = dict(sizes, T=T, B=B)
        work = self.backward_arrays(T, B, sizes, d_outputs.dtype)
        return self.backward_into(truncation, keep, params, sizes, cache, d_outputs, work, following)

    def states_at(self, cache, step):
        """Copies of the states at a step of a segment's cache, in the spec's order (h0: the cache's h)."""
        return tuple(cache[name.removesuffix("0")][step].copy() for name in self.spec.states)

    steps = staticmethod(_sliced)  # steps a+1..b of an array of steps (checkpoints.py)
