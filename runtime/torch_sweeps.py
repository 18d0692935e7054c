"""A torch module of a model with reverse-time states (sweeps.py): its tensors stacked, reversed and made in torch,
on the parameters' device; compile= passed on to every group."""

import dataclasses

import torch

from bptt.runtime.sweeps import _Composed, _own
from bptt.runtime.torch_padding import _data_padding, _read_padding


def _reversed_steps(tensor, lengths):
    """tensor (T, B, ...) with each sequence's own steps reversed (all T without lengths), padding in place."""
    if lengths is None:
        return torch.flip(tensor, [0])
    steps = torch.arange(tensor.shape[0], device=tensor.device)[:, None]
    lengths = lengths.to(tensor.device)
    index = torch.where(steps < lengths, lengths - 1 - steps, steps)
    index = index.reshape(index.shape + (1,) * (tensor.ndim - 2)).expand(tensor.shape)
    return torch.gather(tensor, 0, index)


class _Sweeps(_Composed):
    def stacked(self, parts):
        return torch.cat(parts, dim=-1)

    def reversed_steps(self, array, lengths):
        return _reversed_steps(array, lengths)

    def zeros(self, shape, like):
        return torch.zeros(shape, dtype=like.dtype, device=like.device)

    def identity(self, rows, like):
        return torch.eye(rows, dtype=like.dtype, device=like.device)

    def lengths_of(self, lengths, xs):
        return _data_padding(lengths, xs).lengths

    def loss_count(self, lengths, at, xs, outputs):
        read = _read_padding(_data_padding(lengths, xs), at, xs)
        return outputs.shape[0] if read.valid is None else read.counts(self.spec.mean, outputs.dtype)

    def run_forward(self, passes, params, data, states, lengths, options):
        return passes.forward_call(params, data, None, states, options.get("compile", False), lengths)

    def run_backward(self, passes, params, cache, d_outputs, check_finite, options):
        compile = options.get("compile", False)
        return passes.backward_call(params, cache, d_outputs, None, None, check_finite, None, compile)

    def model_passes(self):
        """The first group's passes with the model's spec: what draws the model's parameters and data."""
        return dataclasses.replace(self.sweeps[0].passes, spec=self.spec)

    def init_params(self, rng, dtype, device, sizes):
        return self.model_passes().init_params(rng, dtype, device, sizes)

    def random_inputs(self, rng, T, B, dtype, device, sizes):
        """xs of the first group's kind, ys of the last's."""
        xs = self.sweeps[0].passes.random_inputs(rng, T, B, dtype, device, _own(self.sweeps[0].passes, sizes))[0]
        ys = self.sweeps[-1].passes.random_inputs(rng, T, B, dtype, device, _own(self.sweeps[-1].passes, sizes))[1]
        return xs, ys
