"""A NumPy module of a model with reverse-time states (sweeps.py): its arrays stacked, reversed and made in NumPy."""

import numpy as np

from bptt.runtime.checks import _checked
from bptt.runtime.common import _check_lengths, _check_sizes
from bptt.runtime.numpy import _blamed, _check_dtype, _truncation, _truncation_weights
from bptt.runtime.numpy_padding import _cache_padding, _data_padding, _read_padding
from bptt.runtime.sweeps import _Composed


def _reversed_steps(array, lengths):
    """array (T, B, ...) with each sequence's own steps reversed (all T without lengths), padding in place."""
    if lengths is None:
        return array[::-1].copy()
    steps = np.arange(array.shape[0])[:, None]
    index = np.where(steps < lengths, lengths - 1 - steps, steps)
    return np.take_along_axis(array, index.reshape(index.shape + (1,) * (array.ndim - 2)), axis=0)


class _Sweeps(_Composed):
    padding, read_padding, cache_padding = (
        staticmethod(_data_padding),
        staticmethod(_read_padding),
        staticmethod(_cache_padding),
    )
    blamed = staticmethod(_blamed)

    def run_forward(self, passes, params, data, states, lengths, options):
        padding, sizes, dtype, x, initial = self._group_arguments(passes, params, data, states, lengths)
        return padding.stopped(passes.spec, *passes.segment_forward(params, sizes, dtype, x, None, initial))

    def stacked(self, parts):
        return np.concatenate([np.asarray(part) for part in parts], axis=-1)

    def reversed_steps(self, array, lengths):
        return _reversed_steps(np.asarray(array), lengths)

    def zeros(self, shape, like):
        return np.zeros(shape, like.dtype)

    def identity(self, rows, like):
        return np.eye(rows, dtype=like.dtype)

    def checked(self, passes, params, xs, ys, states):
        return _checked(passes, params, xs, ys, states, False, ys is not None, False)

    def itemsize(self, dtype):
        return np.dtype(dtype).itemsize

    def keep_weights(self, truncation, T, rng, like):
        return _truncation_weights(truncation, T, rng, like.dtype)

    def steps_joined(self, parts):
        return np.concatenate(parts, axis=0)

    def truncation(self, truncate, rng):
        return _truncation(truncate, rng)

    def group_rngs(self, rng, count):
        return [np.random.default_rng(seed) for seed in rng.integers(0, 2**63, size=count)]

    def at_steps(self, array, steps):
        return array[steps, np.arange(array.shape[1])]

    def random_inputs(self, rng, T, B, dtype, sizes):
        """xs of the first group's kind, ys of the last's."""
        dtype, sizes = _check_dtype(dtype), _check_sizes(self.spec, sizes)
        _check_lengths(T, B)
        first, last = self.sweeps[0].passes, self.sweeps[-1].passes
        return first._draw(rng, T, B, dtype, sizes, "xs"), last._draw(rng, T, B, dtype, sizes, "ys")
