"""A generated JAX module's passes and API glue, run around its maths (_forward and _gradients_and_following,
jitted there): its public functions' argument checks, in the order their signatures give the arguments;
apply's jax.custom_vjp functions and the jitted loss, built once per module; and the segments the checkpoint
driver (checkpoints.py) runs.

The recursions are jax.lax.scans (the backward one last step first); everything else is one expression over
all steps. forward, backward and loss_and_grads check their arguments (shapes, dtypes, and nan, inf or labels
out of range in concrete arrays), then run jitted code; they work under jax.jit too (truncate static:
functools.partial, or static_argnames="truncate"), where values are not known and only shapes and dtypes are
checked. The dtype of the parameters is kept and arrays stay on their device. float64 needs
jax.config.update("jax_enable_x64", True) before the arrays are made: a module never changes that setting."""

import functools
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from bptt.runtime.checkpoints import _checkpoint_actions, _checkpointed, _forward_kept, _segmented
from bptt.runtime.checks import _anywhere, _check_targets, _checked, _checked_backward
from bptt.runtime.common import _check_lengths, _check_sizes, _extent, _float_dtype, _param_sizes, _Spec, _step_bytes
from bptt.runtime.jax import (
    _ages,
    _check_array,
    _check_dtype,
    _check_labels,
    _check_params,
    _keep_weights,
    _step_at,
    _steps_from,
    _truncation,
)
from bptt.runtime.jax_padding import _cache_padding, _data_padding, _Padding, _read_padding
from bptt.runtime.options import _Checkpoints


@dataclass(frozen=True, eq=False)
class _Passes:
    """A JAX module's maths, and what a step of it holds: its arrays' rows (a kept state's, a forward step's,
    a backward step's, a window age's), and XLA's temporaries beside them, a factor measured once
    (codegen/jax/memory.py)."""

    spec: _Spec
    forward: Callable  # jitted (params, x, [y,] *initial states) -> (outputs, cache)
    gradients: Callable  # jitted, ages static: (ages, params, cache, d_outputs, keep, following) -> (grads, handed)
    loss: Callable  # (outputs, y, count) -> (loss, dL/doutputs)
    step_rows: tuple = ("0", "0", "0", "0")
    step_factor: float = 1

    def __post_init__(self):
        made = {"segment_loss": _segment_loss(self)}
        made |= {"output_gradient": jax.jit(self._output_gradient), "apply": _applied(self)}
        made |= {"apply_checkpointed": _applied_checkpointed(self)}
        for name, value in made.items():
            object.__setattr__(self, name, value)

    def init_params(self, rng, dtype, sizes):
        """Random parameters from the key rng: weights ~ N(0, 1/fan_in), vectors ~ N(0, 0.01)."""
        dtype = _check_dtype(dtype)
        sizes = _check_sizes(self.spec, sizes)
        params = {}
        shapes = self.spec.shapes
        for key, (name, dims) in zip(jax.random.split(rng, len(shapes)), shapes.items(), strict=True):
            shape = tuple(_extent(dim, sizes) for dim in dims)
            scale = 0.1 if len(shape) == 1 else 1 / shape[1] ** 0.5
            params[name] = scale * jax.random.normal(key, shape, dtype)
        return params

    def random_inputs(self, rng, T, B, dtype, sizes):
        """xs, then ys, each of the kind the model takes, from the key rng."""
        dtype = _check_dtype(dtype)
        sizes = _check_sizes(self.spec, sizes)
        _check_lengths(T, B)
        drawn = []
        for key, name in zip(jax.random.split(rng), ("xs", "ys"), strict=True):
            rows = self.spec.data[name]
            if name in self.spec.labels:
                drawn.append(jax.random.randint(key, (T, B), 0, sizes[rows]))
            else:
                drawn.append(jax.random.normal(key, (T, B, _extent(rows, sizes)), dtype))
        return tuple(drawn)

    # the runtime's checks, which the shared ones call (checks.py's _checked; every JAX call is checked in full:
    # its parameters are scanned, if concrete)
    check_params, check_array = staticmethod(_check_params), staticmethod(_check_array)
    check_labels, place = staticmethod(_check_labels), staticmethod(_anywhere)

    def checked(self, params, xs, ys, states, targets):
        """(sizes, dtype, x, y, initial states) of the arguments as _checked gives them, every array scanned
        (if concrete), an initial state that is None as zeros."""
        sizes, dtype, x, y, initial = _checked(self, params, xs, ys, states, True, targets)
        initial = tuple(
            jnp.zeros((x.shape[1], sizes[size]), dtype) if value is None else value
            for size, value in zip(self.spec.states.values(), initial, strict=True)
        )
        return sizes, dtype, x, y, initial

    def run_forward(self, params, x, y, initial):
        """(outputs, cache) of the module's _forward."""
        return self.forward(params, x, *((y,) if self.spec.forced else ()), *initial)

    def forward_call(self, params, xs, ys, states, lengths=None):
        """The module's forward: (outputs, cache); lengths: a padded batch's (its padded xs and ys read as zeros)."""
        padding = _data_padding(lengths, xs)
        _, _, x, y, initial = self.checked(params, padding.zeroed(xs), padding.zeroed(ys), states, False)
        return padding.stopped(self.spec, *self.run_forward(params, x, y, initial))

    def backward_call(self, params, cache, d_outputs, truncate, rng, check_finite, checkpoints):
        """The module's backward, its arguments checked."""
        truncation = _truncation(truncate, rng)
        cache, padding = _cache_padding(self.spec, cache)
        sizes, dtype, d_outputs = _checked_backward(self, params, cache, padding.zeroed(d_outputs), check_finite)
        keep = _keep_weights(truncation, sizes["T"], rng, dtype)
        if checkpoints is not None:
            checkpoints = _Checkpoints.of(checkpoints)  # once per call: the schedule's functions take the value
            itemsize = jnp.dtype(dtype).itemsize
            return _segmented(self, truncation, keep, params, sizes, cache, d_outputs, checkpoints, itemsize)
        return self.gradients(_ages(truncation), params, cache, d_outputs, keep)[0]

    def loss_inputs(self, outputs, ys, lengths=None, at=None):
        """(outputs, ys, their padding) as the module's losses takes them: float outputs (not scanned), ys in their
        dtype (zero at padded steps), the padding whose zeroed() zeroes the padded steps' losses (at "last": all
        but each sequence's last step's)."""
        sizes, rows = {}, self.spec.data["outputs"]
        outputs = _check_array("outputs", outputs, ("T", "B", rows), sizes, _float_dtype("outputs", outputs), False)
        padding = _Padding.of(lengths, *outputs.shape[:2]).read_at(at, *outputs.shape[:2])
        return outputs, _check_targets(self, padding.zeroed(ys), sizes, outputs.dtype), padding

    def loss_and_grads_call(self, params, xs, ys, states, truncate, rng, checkpoints, lengths=None, at=None):
        """The module's loss_and_grads, its arguments checked; lengths: a padded batch's (its padded xs and ys read
        as zeros, their steps weighing nothing: dL/doutputs 0 there, and backward, linear in them, gives 0); at
        "last": the loss reads each sequence's last step only (the others weigh nothing, ys unread unless forced)."""
        truncation = _truncation(truncate, rng)
        padding = _data_padding(lengths, xs)
        read = _read_padding(padding, at, xs)
        ys = (padding if self.spec.forced else read).zeroed(ys)
        sizes, dtype, x, y, initial = self.checked(params, padding.zeroed(xs), ys, states, True)
        keep = _keep_weights(truncation, x.shape[0], rng, dtype)
        counts = None if read.valid is None else read.counts(self.spec.mean, dtype)
        if checkpoints is not None:
            sizes.update(T=x.shape[0], B=x.shape[1])
            checkpoints, itemsize = _Checkpoints.of(checkpoints), jnp.dtype(dtype).itemsize
            args = (params, sizes, dtype, x, y, initial, checkpoints, itemsize)
            return _checkpointed(self, truncation, keep, *args, counts=counts)
        loss, d_outputs, cache = self.output_gradient(params, x, y, initial, counts)
        return loss, self.gradients(_ages(truncation), params, cache, d_outputs, keep)[0]

    def forward_mode_inputs(self, params, xs, ys, states, lengths=None, at=None):
        """(x, y, counts, initial states) for forward_mode_grads' jitted _forward_mode, its arguments checked;
        lengths and at as for loss_and_grads (padded xs and ys read as zeros; the steps the loss does not read
        weigh nothing: counts, each step's and sample's divisor of the loss, inf there, so dL/doutputs is exactly
        0 there), else counts None."""
        padding = _data_padding(lengths, xs)
        read = _read_padding(padding, at, xs)
        ys = (padding if self.spec.forced else read).zeroed(ys)
        _, dtype, x, y, initial = self.checked(params, padding.zeroed(xs), ys, states, True)
        return x, y, None if read.valid is None else read.counts(self.spec.mean, dtype), initial

    def apply_call(self, params, xs, ys, states, truncate, rng, checkpoints, lengths=None):
        """The module's apply: the outputs through a custom_vjp whose backward is the derived BPTT; lengths: a
        padded batch's (outputs zero at its padded steps, which get zero gradient)."""
        truncation = _truncation(truncate, rng)
        padding = _data_padding(lengths, xs)
        if checkpoints is not None and lengths is not None:
            raise ValueError("apply(lengths=...) is not supported with checkpoints= yet; use loss_and_grads")
        sizes, dtype, x, y, initial = self.checked(params, padding.zeroed(xs), padding.zeroed(ys), states, False)
        keep = _keep_weights(truncation, x.shape[0], rng, dtype)
        if checkpoints is not None:
            checkpoints, itemsize = _Checkpoints.of(checkpoints), jnp.dtype(dtype).itemsize
            _checkpoint_actions(self, truncation, sizes, x.shape[1], itemsize, checkpoints, x.shape[0])  # fits?
            return self.apply_checkpointed((truncation, checkpoints), params, x, y, initial, keep)
        return self.apply(_ages(truncation), params, x, y, initial, keep, padding.valid)

    def _output_gradient(self, params, x, y, initial, counts=None):
        """(the batch-averaged loss, dL/doutputs, the forward cache); jitted as output_gradient. counts: each step's
        and sample's divisor of the loss (lengths=), else None."""
        outputs, cache = self.run_forward(params, x, y, initial)
        loss, d_outputs = self._segment_loss(outputs, y, outputs.shape[0] if counts is None else counts)
        return loss, d_outputs, cache

    def _segment_loss(self, outputs, y, T):
        """(the loss of a segment's steps, averaged as loss_and_grads averages over all T, dL/doutputs);
        jitted as segment_loss. T may be the segment's steps' divisors instead (counts, lengths=)."""
        if jnp.ndim(T):
            return self.loss(outputs, y, T)
        B = outputs.shape[1]
        return self.loss(outputs, y, T * B if self.spec.mean else B)

    def segment_forward(self, params, sizes, dtype, x, y, initial):
        """(outputs, cache) of the forward pass over the steps of x from the states initial (checkpoints.py)."""
        return self.run_forward(params, x, y, initial)

    def segment_backward(self, truncation, keep, params, sizes, cache, d_outputs, following):
        """The gradients of a segment of steps; following as for _gradients_and_following, replaced by this
        segment's own (keep: the segment's weights, and the flow's from the segment after it if any)."""
        T = d_outputs.shape[0]
        after = dict(following, keep=_step_at(keep, T)) if keep.shape[0] > T else dict(following)
        keep = self.steps(keep, 0, T)
        grads, handed = self.gradients(_ages(truncation), params, cache, d_outputs, keep, after or None)
        following.clear()
        following.update(handed)
        return grads

    def states_at(self, cache, step):
        """The states at a step of a segment's cache, in STATES order."""
        return tuple(_step_at(cache[name.removesuffix("0")], step) for name in self.spec.states)

    def steps(self, array, a, b):
        """Steps a+1..b of an array of steps, array[a:b] (checkpoints.py): one compiled slice for every a, where
        each eager slice is an operation dispatched at ten times the cost."""
        b = min(b, array.shape[0])
        return array if a == 0 and b == array.shape[0] else _steps_from(array, a, b - a)

    def checkpoint_bytes(self, sizes, B, itemsize, ages):
        """(bytes of a kept state, of one step of the forward pass's arrays, of the backward pass's)."""
        return _step_bytes(self.step_rows, sizes, B, itemsize, ages, self.step_factor)


def _segment_loss(passes):
    """The passes' segment_loss: jitted, T static, or the divisors of each step and sample (lengths=) traced."""
    static, counted = jax.jit(passes._segment_loss, static_argnums=2), jax.jit(passes._segment_loss)
    return lambda outputs, y, T: counted(outputs, y, T) if jnp.ndim(T) else static(outputs, y, T)


def _applied(passes):
    """apply's jax.custom_vjp function (ages static): the outputs (zero at padded steps where valid, the steps
    of a padded batch's own, says so); the derived BPTT as its backward."""

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def apply(ages, params, x, y, initial, keep, valid):
        return forward(ages, params, x, y, initial, keep, valid)[0]

    def forward(ages, params, x, y, initial, keep, valid):
        outputs, cache = passes.run_forward(params, x, y, initial)
        return _Padding(valid=valid).zeroed(outputs), (params, cache, keep, valid)

    def backward(ages, residuals, d_outputs):
        params, cache, keep, valid = residuals
        grads = passes.gradients(ages, params, cache, _Padding(valid=valid).zeroed(d_outputs), keep)[0]
        return (*_cotangents(passes.spec, grads), None)

    apply.defvjp(forward, backward)
    return apply


def _applied_checkpointed(passes):
    """apply's jax.custom_vjp function in bounded memory (how = (truncation, checkpoints), static): the
    forward pass keeps only the states the schedule's first forward pass keeps (_forward_kept); the backward
    pass runs the rest of the schedule."""

    def sized(params, x):
        sizes = _param_sizes(passes.spec, params)
        sizes.update(T=x.shape[0], B=x.shape[1])
        return sizes, params[passes.spec.params[0]].dtype

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def apply(how, params, x, y, initial, keep):
        return forward(how, params, x, y, initial, keep)[0]

    def forward(how, params, x, y, initial, keep):
        (truncation, checkpoints), (sizes, dtype) = how, sized(params, x)
        itemsize = jnp.dtype(dtype).itemsize
        parts, kept = _forward_kept(passes, truncation, params, sizes, dtype, x, y, initial, checkpoints, itemsize)
        return jnp.concatenate(parts), (params, x, y, initial, kept, keep)

    def backward(how, residuals, d_outputs):
        (truncation, checkpoints), (params, x, y, initial, kept, keep) = how, residuals
        sizes, dtype = sized(params, x)
        itemsize = jnp.dtype(dtype).itemsize
        args = (params, sizes, dtype, x, y, initial, checkpoints, itemsize, d_outputs, kept)
        return _cotangents(passes.spec, _checkpointed(passes, truncation, keep, *args)[1])

    apply.defvjp(forward, backward)
    return apply


def _cotangents(spec, grads):
    """What a custom_vjp's backward returns for (params, x, y, initial, keep): gradients for the parameters
    and the initial states, none for the data and the weights."""
    return {name: grads[name] for name in spec.params}, None, None, tuple(grads[name] for name in spec.states), None
