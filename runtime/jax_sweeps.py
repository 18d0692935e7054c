"""A JAX module of a model with reverse-time states (sweeps.py): its arrays stacked, reversed and made in JAX."""

import dataclasses

import jax
import jax.numpy as jnp

from bptt.runtime.jax_padding import _data_padding, _read_padding
from bptt.runtime.sweeps import _Composed, _own


def _reversed_steps(array, lengths):
    """array (T, B, ...) with each sequence's own steps reversed (all T without lengths), padding in place."""
    if lengths is None:
        return array[::-1]
    steps = jnp.arange(array.shape[0])[:, None]
    index = jnp.where(steps < lengths, lengths - 1 - steps, steps)
    return jnp.take_along_axis(array, index.reshape(index.shape + (1,) * (array.ndim - 2)), axis=0)


class _Sweeps(_Composed):
    padding, read_padding = staticmethod(_data_padding), staticmethod(_read_padding)
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

    def apply(self):
        raise ValueError("with reverse-time states, apply is not supported yet (loss_and_grads and backward are)")
