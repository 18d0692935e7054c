"""A NumPy module's padded batches (lengths=): which steps of each sequence are its own, its padded steps
zeroed, the divisors of a padded loss, and forward's states carried past a sequence's end."""

from dataclasses import dataclass

import numpy as np

from bptt.runtime.options import _lengths_error, _loss_at


@dataclass(frozen=True)
class _Padding:
    """A right-padded batch (lengths=): each sequence's own steps (B,), and which steps are its own (T, B) (None:
    every step of every sequence, nothing padded; lengths None: no lengths given)."""

    lengths: np.ndarray | None = None
    valid: np.ndarray | None = None

    @classmethod
    def of(cls, lengths, T, B):
        """The padding of a lengths argument for T steps and B sequences; ValueError in one line if it does not fit."""
        if lengths is None:
            return _UNPADDED
        array = lengths if isinstance(lengths, np.ndarray) else _as_array(lengths)
        integral = np.issubdtype(array.dtype, np.integer)
        low, high = (int(array.min()), int(array.max())) if integral and array.size else (1, 1)
        error = _lengths_error(array.shape, array.dtype, integral, low, high, T, B)
        if error:
            raise ValueError(error)
        lengths = array.astype(np.intp)  # a copy: the cache keeps it
        valid = np.arange(T)[:, None] < lengths if low < T else None
        return cls(lengths, valid)

    def zeroed(self, array):
        """array (T, B, ...) with its padded steps zero (a fresh array), or array itself if nothing is padded or
        it is no array of that shape (the checks then say what it must be)."""
        if self.valid is None or not isinstance(array, np.ndarray) or array.shape[:2] != self.valid.shape:
            return array
        return np.where(self.valid.reshape(self.valid.shape + (1,) * (array.ndim - 2)), array, 0).astype(array.dtype)

    def counts(self, mean, dtype):
        """Each step's and sample's divisor of the loss (T, B): B, times its steps read for a mean; inf if not read."""
        B = self.valid.shape[1]
        return np.where(self.valid, B * self.valid.sum(axis=0) if mean else B, np.inf).astype(dtype)

    def read_at(self, at, T, B):
        """The steps a loss reads: these (at None: each sequence's own), or (at "last") each sequence's last step
        only (step T without lengths)."""
        if _loss_at(at) is None:
            return self
        lengths = np.full(B, T, np.intp) if self.lengths is None else self.lengths
        return _Padding(lengths, np.arange(T)[:, None] == lengths - 1)

    def stopped(self, spec, outputs, cache):
        """forward's (outputs, cache) of a padded batch, in place: its outputs zero at padded steps, each state
        carried unchanged past its sequence's last step (the final states are the cache's last), the lengths kept."""
        if self.lengths is None:
            return outputs, cache
        if self.valid is not None:
            outputs[~self.valid] = 0
            steps = np.minimum(np.arange(self.valid.shape[0] + 1)[:, None], self.lengths)[..., None]
            for name in spec.states:
                array = cache[name.removesuffix("0")]
                array[:] = np.take_along_axis(array, steps, axis=0)
        return outputs, {**cache, "lengths": self.lengths}


_UNPADDED = _Padding()


def _as_array(values):
    """values (a list of lengths, say) as a NumPy array; one of dtype object if NumPy cannot make one."""
    try:
        return np.asarray(values)
    except (ValueError, TypeError):
        return np.asarray(None, dtype=object)


def _cache_padding(spec, cache):
    """(the cache without its lengths, their padding): forward's cache of a padded batch remembers its lengths."""
    if not (isinstance(cache, dict) and "lengths" in cache):
        return cache, None
    rest = {key: value for key, value in cache.items() if key != "lengths"}
    first = rest.get(next(iter(spec.cache)))
    if not (isinstance(first, np.ndarray) and first.ndim >= 2):
        return rest, None  # the cache's checks say what is wrong
    return rest, _Padding.of(cache["lengths"], first.shape[0], first.shape[1])


def _data_padding(lengths, xs):
    """The padding of a call's lengths, for the steps and sequences of xs (if xs is no array of them, its checks
    will refuse it: no padding)."""
    if lengths is None or not (isinstance(xs, np.ndarray) and xs.ndim >= 2):
        return _UNPADDED
    return _Padding.of(lengths, xs.shape[0], xs.shape[1])


def _read_padding(padding, at, xs):
    """The padding of the steps a call's loss reads (read_at), for the steps and sequences of xs."""
    if _loss_at(at) is None or not (isinstance(xs, np.ndarray) and xs.ndim >= 2):
        return padding
    return padding.read_at(at, xs.shape[0], xs.shape[1])
