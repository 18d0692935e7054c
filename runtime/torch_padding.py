"""A torch module's padded batches (lengths=), as numpy_padding.py's, on the tensors' device."""

from dataclasses import dataclass

import torch

from bptt.runtime.common import _dtype_name
from bptt.runtime.options import _lengths_error, _loss_at


@dataclass(frozen=True)
class _Padding:
    """A right-padded batch (lengths=): each sequence's own steps (B,), and which steps are its own (T, B) (None:
    nothing is padded; lengths None: no lengths given). As numpy_padding.py's, in torch."""

    lengths: torch.Tensor | None = None
    valid: torch.Tensor | None = None

    @classmethod
    def of(cls, lengths, T, B, device):
        """The padding of a lengths argument for T steps and B sequences; ValueError in one line if it does not fit."""
        if lengths is None:
            return _UNPADDED
        tensor = lengths if isinstance(lengths, torch.Tensor) else _as_tensor(lengths)
        if tensor is None:
            raise ValueError(_lengths_error((), type(lengths).__name__, False, 1, 1, T, B))
        integral = not (tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool)
        low, high = (int(tensor.min()), int(tensor.max())) if integral and tensor.numel() else (1, 1)
        error = _lengths_error(tuple(tensor.shape), _dtype_name(tensor.dtype), integral, low, high, T, B)
        if error:
            raise ValueError(error)
        lengths = tensor.to(device=device, dtype=torch.int64, copy=True)  # the cache keeps it
        valid = torch.arange(T, device=device)[:, None] < lengths if low < T else None
        return cls(lengths, valid)

    def zeroed(self, tensor):
        """tensor (T, B, ...) with its padded steps zero (a fresh tensor), or tensor itself if nothing is padded or
        it is no tensor of that shape (the checks then say what it must be)."""
        if self.valid is None or not isinstance(tensor, torch.Tensor) or tuple(tensor.shape[:2]) != self.valid.shape:
            return tensor
        return torch.where(self.valid.reshape(self.valid.shape + (1,) * (tensor.dim() - 2)), tensor, 0)

    def counts(self, mean, dtype):
        """Each step's and sample's divisor of the loss (T, B): B, times its steps read for a mean; inf if not read."""
        B = self.valid.shape[1]
        return torch.where(self.valid, B * self.valid.sum(dim=0) if mean else B, torch.inf).to(dtype)

    def read_at(self, at, T, B, device):
        """The steps a loss reads: these (at None: each sequence's own), or (at "last") each sequence's last step
        only (step T without lengths)."""
        if _loss_at(at) is None:
            return self
        lengths = torch.full((B,), T, device=device) if self.lengths is None else self.lengths
        return _Padding(lengths, torch.arange(T, device=device)[:, None] == lengths - 1)

    def stopped(self, spec, outputs, cache):
        """forward's (outputs, cache) of a padded batch, in place: its outputs zero at padded steps, each state
        carried unchanged past its sequence's last step (the final states are the cache's last), the lengths kept."""
        if self.lengths is None:
            return outputs, cache
        if self.valid is not None:
            outputs[~self.valid] = 0
            steps = torch.arange(self.valid.shape[0] + 1, device=self.lengths.device)[:, None]
            steps = torch.minimum(steps, self.lengths)[..., None]
            for name in spec.states:
                tensor = cache[name.removesuffix("0")]
                tensor.copy_(torch.gather(tensor, 0, steps.expand(-1, -1, tensor.shape[-1])))
        return outputs, {**cache, "lengths": self.lengths}


_UNPADDED = _Padding()


def _as_tensor(values):
    """values (a list of lengths, a NumPy array) as a tensor; None if torch cannot make one."""
    try:
        return torch.as_tensor(values)
    except (ValueError, TypeError, RuntimeError):
        return None


def _data_padding(lengths, xs):
    """The padding of a call's lengths, for the steps and sequences of xs (if xs is no tensor of them, its checks
    will refuse it: no padding)."""
    if lengths is None or not (isinstance(xs, torch.Tensor) and xs.dim() >= 2):
        return _UNPADDED
    return _Padding.of(lengths, xs.shape[0], xs.shape[1], xs.device)


def _cache_padding(spec, cache):
    """(the cache without its lengths, their padding): forward's cache of a padded batch remembers its lengths."""
    if not (isinstance(cache, dict) and "lengths" in cache):
        return cache, _UNPADDED
    rest = {key: value for key, value in cache.items() if key != "lengths"}
    first = rest.get(next(iter(spec.cache)))
    if not (isinstance(first, torch.Tensor) and first.dim() >= 2):
        return rest, _UNPADDED  # the cache's checks say what is wrong
    return rest, _Padding.of(cache["lengths"], first.shape[0], first.shape[1], first.device)


def _read_padding(padding, at, xs):
    """The padding of the steps a call's loss reads (read_at), for the steps and sequences of xs."""
    if _loss_at(at) is None or not (isinstance(xs, torch.Tensor) and xs.dim() >= 2):
        return padding
    return padding.read_at(at, xs.shape[0], xs.shape[1], xs.device)
