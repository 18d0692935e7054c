"""A JAX module of a model with reverse-time states (sweeps.py): its arrays stacked, reversed and made in JAX."""

import dataclasses

import jax.numpy as jnp

from bptt.runtime.jax import _keep_weights
from bptt.runtime.jax_padding import _cache_padding, _data_padding, _read_padding
from bptt.runtime.sweeps import _Composed, _own


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
