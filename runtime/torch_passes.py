"""A generated torch module's passes, run around its maths (_forward, _adjoints, _window_adjoints, _gradients):
its public functions' argument checks, in the order their signatures give the arguments; its tensors, made
fresh each call from the module's tables of their dims; and the segments the checkpoint driver
(checkpoints.py) runs. torch_autograd.py holds its autograd Functions and nn.Module."""

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from bptt.runtime.checkpoints import _checkpointed, _segmented, _sliced
from bptt.runtime.checks import _check_targets, _checked, _checked_backward
from bptt.runtime.common import _check_lengths, _check_sizes, _extent, _float_dtype, _Spec, _step_bytes, _viewed
from bptt.runtime.options import _Checkpoints
from bptt.runtime.torch import _check_compile, _keep_weights, _truncation
from bptt.runtime.torch_checks import (
    _all_finite,
    _blamed,
    _check_array,
    _check_dtype,
    _check_labels,
    _check_params,
    _finite,
    _label_values,
)
from bptt.runtime.torch_padding import _UNPADDED, _cache_padding, _data_padding, _Padding, _read_padding

# the functions and classes a generated torch module defines: its public shells, each a call of its _Passes,
# the autograd glue that hands its signature to the runtime's, then its maths (and their steps for compile=True,
# if its loops have any)
SHELLS = ("init_params", "random_inputs", "forward", "backward", "losses", "loss_and_grads", "forward_mode_grads")
GLUE = ("BPTT", "CompiledBPTT", "CheckpointedBPTT", "Model")
MATHS = ("_forward", "_adjoints", "_window_adjoints", "_gradients", "_forward_step", "_adjoints_step")


@dataclass(frozen=True, eq=False)
class _Passes:
    """A torch module's maths and the tables of its work tensors: dims as CACHE writes them, a view of a
    stacked tensor as (that tensor, its first row, its end row)."""

    spec: _Spec
    forward: Callable  # (params, sizes, x, [y,] *initial states, work, compile): the forward pass, into work
    adjoints: Callable  # (keep, params, sizes, cache, d_outputs, work, following, compile) -> (adjoints, initial)
    window_adjoints: Callable  # (k, params, sizes, cache, d_outputs, following) -> (adjoints, initial)
    gradients: Callable  # (params, sizes, cache, adjoints, d_outputs): the parameters' gradients
    loss: Callable  # (outputs, y, count) -> (loss, dL/doutputs)
    forward_work: dict
    backward_work: dict
    views: dict = field(default_factory=dict)
    step_rows: tuple = ("0", "0", "0", "0")  # the rows of a kept state, a forward step, a backward step, a window age

    # the runtime's checks, which the shared ones call (checks.py's _checked)
    check_params, check_array = staticmethod(_check_params), staticmethod(_check_array)
    check_labels, label_values = staticmethod(_check_labels), staticmethod(_label_values)
    finite, all_finite = staticmethod(_finite), staticmethod(_all_finite)

    def place(self, params):
        """Where the tensors must be, as the checks take it: the device of the parameters."""
        return (params[self.spec.params[0]].device,)

    def init_params(self, rng, dtype, device, sizes):
        """Random parameters: weights ~ N(0, 1/fan_in), vectors ~ N(0, 0.01); rng a torch.Generator (or None)."""
        dtype = _check_dtype(dtype)
        sizes = _check_sizes(self.spec, sizes)
        params = {}
        for name, dims in self.spec.shapes.items():
            shape = tuple(_extent(dim, sizes) for dim in dims)
            scale = 0.1 if len(shape) == 1 else shape[1] ** -0.5
            draws = torch.randn(shape, generator=rng, dtype=dtype, device=None if rng is None else rng.device)
            params[name] = (scale * draws).to(device)
        return params

    def random_inputs(self, rng, T, B, dtype, device, sizes):
        """xs, then ys, each of the kind the model takes, on device."""
        dtype = _check_dtype(dtype)
        sizes = _check_sizes(self.spec, sizes)
        _check_lengths(T, B)
        where = None if rng is None else rng.device
        drawn = []
        for name in ("xs", "ys"):
            rows = self.spec.data[name]
            if name in self.spec.labels:
                drawn.append(torch.randint(0, sizes[rows], (T, B), generator=rng, device=where))
            else:
                shape = (T, B, _extent(rows, sizes))
                drawn.append(torch.randn(shape, generator=rng, dtype=dtype, device=where))
        return drawn[0].to(device), drawn[1].to(device)

    def forward_call(self, params, xs, ys, states, compile, lengths=None):
        """The module's forward: (outputs, cache), without an autograd graph; lengths: a padded batch's (its
        padded xs and ys are read as zeros)."""
        compile = _check_compile(compile)
        padding = _data_padding(lengths, xs)
        xs, ys = padding.zeroed(xs), padding.zeroed(ys)
        sizes, dtype, x, y, initial = _checked(self, params, xs, ys, states, True, False)
        return padding.stopped(self.spec, *self.run_forward(params, sizes, dtype, x.device, x, y, initial, compile))

    def backward_call(self, params, cache, d_outputs, truncate, rng, check_finite, checkpoints, compile):
        """The module's backward, its arguments checked."""
        truncation = _truncation(truncate, rng)
        compile = _check_compile(compile, checkpoints)
        cache, padding = _cache_padding(self.spec, cache)
        sizes, dtype, d_outputs = _checked_backward(self, params, cache, padding.zeroed(d_outputs), check_finite)
        with torch.no_grad():
            if checkpoints is not None:
                checkpoints = _Checkpoints.of(checkpoints)  # once per call: the schedule's functions take the value
                keep = _truncation_weights(truncation, sizes["T"], rng, d_outputs)
                return _segmented(self, truncation, keep, params, sizes, cache, d_outputs, checkpoints, dtype.itemsize)
            return self.backward(truncation, rng, params, sizes, cache, d_outputs, compile)

    def loss_inputs(self, outputs, ys, lengths=None, at=None):
        """(outputs, ys, their padding) as the module's losses takes them: float outputs (not scanned), ys on their
        device (zero at padded steps), the padding whose zeroed() zeroes the padded steps' losses (at "last": all
        but each sequence's last step's)."""
        sizes, rows = {}, self.spec.data["outputs"]
        dtype = _float_dtype("outputs", outputs)
        outputs = _check_array("outputs", outputs, ("T", "B", rows), sizes, dtype, False)
        padding = _Padding.of(lengths, *outputs.shape[:2], outputs.device).read_at(
            at, *outputs.shape[:2], outputs.device
        )
        return outputs, _check_targets(self, padding.zeroed(ys), sizes, outputs.dtype, (outputs.device,)), padding

    def loss_and_grads_call(self, params, xs, ys, states, truncate, rng, checkpoints, compile, lengths=None, at=None):
        """The module's loss_and_grads, its arguments checked (a parameter's nan or inf named from the result);
        lengths: a padded batch's (its padded xs and ys read as zeros, their steps weighing nothing); at "last":
        the loss reads each sequence's last step only (the others weigh nothing, their ys unread unless forced)."""
        truncation = _truncation(truncate, rng)
        compile = _check_compile(compile, checkpoints)
        padding = _data_padding(lengths, xs)
        read = _read_padding(padding, at, xs)
        xs, ys = padding.zeroed(xs), (padding if self.spec.forced else read).zeroed(ys)
        if checkpoints is not None:
            return self.checkpointed_loss(truncation, rng, params, xs, ys, states, checkpoints, read)
        loss, d_outputs, cache, sizes = self.output_gradient(params, xs, ys, states, compile, False, read)
        with torch.no_grad():
            grads = self.backward(truncation, rng, params, sizes, cache, d_outputs, compile)
        return _blamed(self.spec, params, loss, grads)

    def output_gradient(self, params, xs, ys, states, compile=False, check_finite=True, padding=_UNPADDED):
        """(the batch-averaged loss, dL/doutputs, the forward cache, sizes); check_finite=False: the parameters
        are not scanned for nan and inf (the caller looks at its result); padding: a padded batch's, whose padded
        steps' losses weigh nothing (dL/doutputs 0 there: backward, linear in them, gives them zero gradient)."""
        sizes, dtype, x, y, initial = _checked(self, params, xs, ys, states, check_finite, True)
        with torch.no_grad():
            outputs, cache = self.run_forward(params, sizes, dtype, x.device, x, y, initial, compile)
            counts = sizes["T"] if padding.valid is None else padding.counts(self.spec.mean, dtype)
            loss, d_outputs = self.segment_loss(outputs, y, counts)
        return loss, d_outputs, cache, sizes

    def forward_mode_gradient(self, params, xs, ys, states, lengths=None, at=None):
        """output_gradient for forward_mode_grads; lengths and at as for loss_and_grads (padded xs and ys read as
        zeros; the steps the loss does not read weigh nothing: dL/doutputs exactly 0 there, so no tangent carried
        through them counts)."""
        padding = _data_padding(lengths, xs)
        read = _read_padding(padding, at, xs)
        ys = (padding if self.spec.forced else read).zeroed(ys)
        return self.output_gradient(params, padding.zeroed(xs), ys, states, padding=read)

    @torch.no_grad()
    def checkpointed_loss(self, truncation, rng, params, xs, ys, states, checkpoints, padding=_UNPADDED):
        """loss_and_grads with checkpoints, its arguments checked here (a parameter's nan or inf from the result)."""
        sizes, dtype, x, y, initial = _checked(self, params, xs, ys, states, False, True)
        checkpoints = _Checkpoints.of(checkpoints)  # once per call: the schedule's functions take the value
        keep = _truncation_weights(truncation, sizes["T"], rng, params[self.spec.params[0]])
        counts = None if padding.valid is None else padding.counts(self.spec.mean, dtype)
        loss, grads = _checkpointed(
            self, truncation, keep, params, sizes, dtype, x, y, initial, checkpoints, dtype.itemsize, counts=counts
        )
        return _blamed(self.spec, params, loss, grads)

    def arrays(self, table, T, B, sizes, dtype, device, first_steps=False):
        """The tensors of a table (uninitialised), then the views of its stacked ones; first_steps: step 0 of
        the tensors of steps 0..T is zero (what the cache holds before the first step)."""
        lengths = dict(sizes, T=T, B=B)
        work = {}
        for name, dims in table.items():
            work[name] = torch.empty(tuple([_extent(dim, lengths) for dim in dims]), dtype=dtype, device=device)
            if first_steps and dims[0] == "T+1":
                work[name][0] = 0
        return _viewed(work, self.views, lengths)

    @torch.no_grad()
    def run_forward(self, params, sizes, dtype, device, x, y, initial, compile=False):
        """(outputs, cache): the forward pass in place into fresh tensors (no autograd graph); compile=True:
        each step of the loop through torch.compile."""
        work = self.arrays(self.forward_work, x.shape[0], x.shape[1], sizes, dtype, device, first_steps=True)
        self.forward(params, sizes, x, *((y,) if self.spec.forced else ()), *initial, work, compile)
        first, *rest = self.spec.cache
        return work[self.spec.output], {first: x, **{name: work[name] for name in rest}}

    def backward(self, truncation, rng, params, sizes, cache, d_outputs, compile=False):
        """The gradients of backward, unchecked (truncation from _truncation)."""
        keep = _truncation_weights(truncation, d_outputs.shape[0], rng, d_outputs)
        return self.segment_backward(truncation, keep, params, sizes, cache, d_outputs, None, compile)

    def segment_backward(self, truncation, keep, params, sizes, cache, d_outputs, following=None, compile=False):
        """The gradients, all steps or a segment of them; following and compile as for the module's _adjoints
        (a window's adjoints are not compiled)."""
        if truncation.windowed:
            adjoints, initial = self.window_adjoints(truncation.value, params, sizes, cache, d_outputs, following)
        else:
            T, B = d_outputs.shape[0], d_outputs.shape[1]
            work = self.arrays(self.backward_work, T, B, sizes, d_outputs.dtype, d_outputs.device)
            adjoints, initial = self.adjoints(keep, params, sizes, cache, d_outputs, work, following, compile)
        grads = self.gradients(params, sizes, cache, adjoints, d_outputs)
        grads.update(zip(self.spec.states, initial, strict=True))
        return grads

    def segment_forward(self, params, sizes, dtype, x, y, initial):
        """(outputs, cache) of the forward pass over the steps of x from the states initial (checkpoints.py)."""
        return self.run_forward(params, sizes, dtype, x.device, x, y, initial)

    def segment_loss(self, outputs, y, T):
        """(the loss of a segment's steps, averaged as loss_and_grads averages over all T, dL/doutputs); T may be
        the segment's steps' divisors instead (counts, lengths=)."""
        if isinstance(T, torch.Tensor):
            return self.loss(outputs, y, T)
        B = outputs.shape[1]
        return self.loss(outputs, y, T * B if self.spec.mean else B)

    def states_at(self, cache, step):
        """Copies of the states at a step of a segment's cache, in STATES order."""
        return tuple(cache[name.removesuffix("0")][step].clone() for name in self.spec.states)

    steps = staticmethod(_sliced)  # steps a+1..b of an array of steps (checkpoints.py)

    def checkpoint_bytes(self, sizes, B, itemsize, ages):
        """(bytes of a kept state, of one step of the forward pass's arrays, of the backward pass's)."""
        return _step_bytes(self.step_rows, sizes, B, itemsize, ages)


def _truncation_weights(truncation, T, rng, like):
    """keep (_keep_weights) when chunks or random truncation weight the flows, else None."""
    return _keep_weights(truncation, T, rng, like) if truncation.weighted else None
