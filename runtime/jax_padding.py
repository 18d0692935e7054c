"""A JAX module's padded batches (lengths=), as numpy_padding.py's, lengths traced under jit."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bptt.runtime.common import _dtype_name
from bptt.runtime.jax import _label_range
from bptt.runtime.options import _lengths_error, _loss_at


class _Padding(NamedTuple):
    """A right-padded batch (lengths=): each sequence's own steps (B,), and which steps are its own (T, B)
    (lengths None: no lengths given). As numpy_padding.py's, in JAX, lengths traced under jit (new lengths compile
    nothing new; their values are checked where they are concrete); a pytree, so jit and custom_vjp take it."""

    lengths: object = None
    valid: object = None

    @classmethod
    def of(cls, lengths, T, B):
        """The padding of a lengths argument for T steps and B sequences; ValueError in one line if it does not fit."""
        if lengths is None:
            return cls()
        array = lengths if isinstance(lengths, jax.Array) else _as_array(lengths)
        if array is None:
            raise ValueError(_lengths_error((), type(lengths).__name__, False, 1, 1, T, B))
        integral = jnp.issubdtype(array.dtype, jnp.integer)
        low, high = _label_range(array) if integral and array.size else (1, 1)
        if isinstance(low, jax.core.Tracer):
            low, high = 1, 1  # traced: only the shape and dtype are known
        error = _lengths_error(tuple(array.shape), _dtype_name(array.dtype), integral, int(low), int(high), T, B)
        if error:
            raise ValueError(error)
        return cls(array, jnp.arange(T)[:, None] < array)

    def zeroed(self, array):
        """array (T, B, ...) with its padded steps zero, or array itself if no lengths were given or it is no
        array of that shape (the checks then say what it must be)."""
        if self.valid is None or getattr(array, "shape", ())[:2] != self.valid.shape:
            return array
        return jnp.where(self.valid.reshape(self.valid.shape + (1,) * (array.ndim - 2)), array, 0)

    def counts(self, mean, dtype):
        """Each step's and sample's divisor of the loss (T, B): B, times its steps read for a mean; inf if not read."""
        B = self.valid.shape[1]
        return jnp.where(self.valid, B * self.valid.sum(axis=0) if mean else B, jnp.inf).astype(dtype)

    def read_at(self, at, T, B):
        """The steps a loss reads: these (at None: each sequence's own), or (at "last") each sequence's last step
        only (step T without lengths)."""
        if _loss_at(at) is None:
            return self
        lengths = jnp.full((B,), T) if self.lengths is None else self.lengths
        return _Padding(lengths, jnp.arange(T)[:, None] == lengths - 1)

    def stopped(self, spec, outputs, cache):
        """forward's (outputs, cache) of a padded batch: its outputs zero at padded steps, each state carried
        unchanged past its sequence's last step (the final states are the cache's last), the lengths kept."""
        if self.valid is None:
            return outputs, cache
        steps = jnp.minimum(jnp.arange(self.valid.shape[0] + 1)[:, None], self.lengths)[..., None]
        cache = dict(cache, lengths=self.lengths)
        for name in spec.states:
            state = cache[name.removesuffix("0")]
            cache[name.removesuffix("0")] = jnp.take_along_axis(state, jnp.broadcast_to(steps, state.shape), axis=0)
        return self.zeroed(outputs), cache


def _as_array(values):
    """values (a list of lengths, a NumPy array) as a JAX array; None if JAX cannot make one."""
    try:
        return jnp.asarray(values)
    except (ValueError, TypeError):
        return None


def _data_padding(lengths, xs):
    """The padding of a call's lengths, for the steps and sequences of xs (if xs is no array of them, its checks
    will refuse it: no padding)."""
    if lengths is None or len(getattr(xs, "shape", ())) < 2:
        return _Padding()
    return _Padding.of(lengths, xs.shape[0], xs.shape[1])


def _cache_padding(spec, cache):
    """(the cache without its lengths, their padding): forward's cache of a padded batch remembers its lengths."""
    if not (isinstance(cache, dict) and "lengths" in cache):
        return cache, _Padding()
    rest = {key: value for key, value in cache.items() if key != "lengths"}
    return rest, _data_padding(cache["lengths"], rest.get(next(iter(spec.cache))))


def _read_padding(padding, at, xs):
    """The padding of the steps a call's loss reads (read_at), for the steps and sequences of xs."""
    if _loss_at(at) is None or len(getattr(xs, "shape", ())) < 2:
        return padding
    return padding.read_at(at, xs.shape[0], xs.shape[1])
