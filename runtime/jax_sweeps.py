"""A JAX module of a model with reverse-time states (sweeps.py): its arrays stacked, reversed and made in JAX."""

import dataclasses
import functools

import jax
import jax.numpy as jnp

from bptt.runtime.common import _extent, _param_sizes
from bptt.runtime.jax import _keep_weights, _truncation
from bptt.runtime.jax_padding import _cache_padding, _data_padding, _read_padding
from bptt.runtime.sweep_checks import _checked_call
from bptt.runtime.sweeps import _Composed, _own, _refuse


def _reversed_steps(array, lengths):
    """array (T, B, ...) with each sequence's own steps reversed (all T without lengths), padding in place."""
    if lengths is None:
        return array[::-1]
    steps = jnp.arange(array.shape[0])[:, None]
    index = jnp.where(steps < lengths, lengths - 1 - steps, steps)
    return jnp.take_along_axis(array, index.reshape(index.shape + (1,) * (array.ndim - 2)), axis=0)


class _Sweeps(_Composed):
    padding, read_padding, cache_padding = (
        staticmethod(_data_padding),
        staticmethod(_read_padding),
        staticmethod(_cache_padding),
    )
    scans_params = True  # every JAX call is checked in full

    def run_forward(self, passes, params, data, states, lengths, options):
        padding, sizes, dtype, x, initial = self._group_arguments(passes, params, data, states, lengths)
        sized = zip(passes.spec.states.values(), initial, strict=True)
        initial = tuple(
            jnp.zeros((x.shape[1], sizes[size]), dtype) if value is None else value for size, value in sized
        )
        return padding.stopped(passes.spec, *passes.run_forward(params, x, None, initial))

    def stacked(self, parts):
        return jnp.concatenate(parts, axis=-1)

    def reversed_steps(self, array, lengths):
        return _reversed_steps(array, lengths)

    def zeros(self, shape, like):
        return jnp.zeros(shape, like.dtype)

    def identity(self, rows, like):
        return jnp.eye(rows, dtype=like.dtype)

    def checked(self, passes, params, xs, ys, states):
        return passes.checked(params, xs, ys, states, ys is not None)

    def itemsize(self, dtype):
        return jnp.dtype(dtype).itemsize

    def keep_weights(self, truncation, T, rng, like):
        return _keep_weights(truncation, T, rng, like.dtype)

    def steps_joined(self, parts):
        return jnp.concatenate(parts, axis=0)

    def truncation(self, truncate, rng):
        return _truncation(truncate, rng)

    def group_rngs(self, rng, count):
        return list(jax.random.split(rng, count))

    def holds(self, condition):
        return isinstance(condition, jax.core.Tracer) or bool(condition)

    def at_steps(self, array, steps):
        return array[steps, jnp.arange(array.shape[1])]

    def ragged(self, lengths, T):
        return lengths is not None  # traced under jit: every padded batch's reverse groups gather

    def init_params(self, rng, dtype, sizes):
        return dataclasses.replace(self.sweeps[0].passes, spec=self.spec).init_params(rng, dtype, sizes)

    def random_inputs(self, rng, T, B, dtype, sizes):
        """xs of the first group's kind, ys of the last's."""
        first, last = self.sweeps[0].passes, self.sweeps[-1].passes
        return first.random_inputs(rng, T, B, dtype, _own(first, sizes))[0], last.random_inputs(
            rng, T, B, dtype, _own(last, sizes)
        )[1]

    def apply_call(self, params, xs, states, truncate, rng, checkpoints, lengths=None):
        """The module's apply: the outputs through a jax.custom_vjp whose backward is the groups' derived BPTT, the
        arguments checked once (concrete ones scanned); lengths: a padded batch's (outputs zero at its padded steps,
        which get zero gradient). truncate and rng as for loss_and_grads: each group's backward truncates its own
        steps (_truncated). checkpoints are refused."""
        _refuse(checkpoints=checkpoints)
        truncation = self.truncation(truncate, rng)  # a bad truncate or rng fails before the forward pass
        x, lengths = _checked_call(self, params, xs, None, states, lengths, None, True)
        sizes, dtype = _param_sizes(self.spec, params), params[self.spec.params[0]].dtype
        sized = zip(self.spec.states.values(), states, strict=True)
        initial = tuple(jnp.zeros((x.shape[1], _extent(size, sizes)), dtype) if v is None else v for size, v in sized)
        applied = self.__dict__.get("_applied")
        if applied is None:
            applied = _sweeps_applied(self)
            object.__setattr__(self, "_applied", applied)
        return applied(truncation.argument, params, x, initial, lengths, rng if truncation.randomized else None)


def _sweeps_applied(sweeps):
    """apply's jax.custom_vjp function (truncate static): the outputs of the groups' forward passes
    (sweeps._forward); its backward the groups' derived BPTT (backward_call, truncated as truncate says, random
    truncation's weights drawn from rng), nothing for the data (xs' cotangent is zero), the lengths and rng."""

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def apply(truncate, params, x, initial, lengths, rng):
        return forward(truncate, params, x, initial, lengths, rng)[0]

    def forward(truncate, params, x, initial, lengths, rng):
        outputs, cache = sweeps._forward(params, x, initial, lengths, {})
        return outputs, (params, cache, rng)

    def backward(truncate, residuals, d_outputs):
        params, cache, rng = residuals
        grads = sweeps.backward_call(params, cache, d_outputs, truncate, rng, False, None)
        initial = tuple(grads[name] for name in sweeps.spec.states)
        return {name: grads[name] for name in sweeps.spec.params}, None, initial, None, None

    apply.defvjp(forward, backward)
    return apply
