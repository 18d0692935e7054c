"""A torch module of a model with reverse-time states (sweeps.py): its tensors stacked, reversed and made in torch,
on the parameters' device; compile= passed on to every group."""

import dataclasses

import torch

from bptt.runtime.checks import _checked
from bptt.runtime.sweep_checkpoints import _kept_backward, _kept_forward
from bptt.runtime.sweeps import _Composed, _own, _refuse
from bptt.runtime.torch import _check_compile
from bptt.runtime.torch_autograd import _Model
from bptt.runtime.torch_padding import _cache_padding, _data_padding, _read_padding
from bptt.runtime.torch_passes import _truncation_weights


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
    padding, read_padding, cache_padding = (
        staticmethod(_data_padding),
        staticmethod(_read_padding),
        staticmethod(_cache_padding),
    )

    def stacked(self, parts):
        return torch.cat(parts, dim=-1)

    def reversed_steps(self, array, lengths):
        return _reversed_steps(array, lengths)

    def zeros(self, shape, like):
        return torch.zeros(shape, dtype=like.dtype, device=like.device)

    def identity(self, rows, like):
        return torch.eye(rows, dtype=like.dtype, device=like.device)

    def checked(self, passes, params, xs, ys, states):
        return _checked(passes, params, xs, ys, states, True, ys is not None)

    def itemsize(self, dtype):
        return dtype.itemsize

    def keep_weights(self, truncation, T, rng, like):
        return _truncation_weights(truncation, T, rng, like)

    def steps_joined(self, parts):
        return torch.cat(parts, dim=0)

    @torch.no_grad()
    def checkpointed_loss(self, params, xs, ys, states, truncate, checkpoints, lengths, at, **options):
        _check_compile(options.get("compile", False), checkpoints)
        return super().checkpointed_loss(params, xs, ys, states, truncate, checkpoints, lengths, at)

    def run_forward(self, passes, params, data, states, lengths, options):
        return passes.forward_call(params, data, None, states, options.get("compile", False), lengths)

    def run_backward(self, passes, params, cache, d_outputs, check_finite, options):
        if options.get("checkpoints") is not None:
            _check_compile(options.get("compile", False), options["checkpoints"])
            return self.segmented_backward(passes, params, cache, d_outputs, check_finite, options["checkpoints"])
        compile = options.get("compile", False)
        return passes.backward_call(params, cache, d_outputs, None, None, check_finite, None, compile)

    @torch.no_grad()
    def segmented_backward(self, passes, params, cache, d_outputs, check_finite, checkpoints):
        return super().segmented_backward(passes, params, cache, d_outputs, check_finite, checkpoints)

    def model_passes(self):
        """The last group's passes with the model's spec: what draws the model's parameters, checks its arguments,
        and takes its loss (Model's)."""
        return dataclasses.replace(self.sweeps[-1].passes, spec=self.spec)

    def init_params(self, rng, dtype, device, sizes):
        return self.model_passes().init_params(rng, dtype, device, sizes)

    def random_inputs(self, rng, T, B, dtype, device, sizes):
        """xs of the first group's kind, ys of the last's."""
        xs = self.sweeps[0].passes.random_inputs(rng, T, B, dtype, device, _own(self.sweeps[0].passes, sizes))[0]
        ys = self.sweeps[-1].passes.random_inputs(rng, T, B, dtype, device, _own(self.sweeps[-1].passes, sizes))[1]
        return xs, ys


class _SweepsBPTT(torch.autograd.Function):
    """The outputs of a model with reverse-time states, whose backward runs the groups' derived BPTT:
    _SweepsBPTT.apply(sweeps, compile, checkpoints, lengths, xs, *initial states, *params); with checkpoints, each
    group's forward pass keeps its schedule's states only (sweep_checkpoints.py)."""

    @staticmethod
    def forward(ctx, sweeps, compile, checkpoints, lengths, xs, *values):
        states, params = values[: len(sweeps.spec.states)], values[len(sweeps.spec.states) :]
        named = dict(zip(sweeps.spec.params, params, strict=True))
        if checkpoints is None:
            outputs, ctx.cache = sweeps.forward_call(named, xs, states, lengths, compile=compile)
        else:
            outputs, ctx.kept = _kept_forward(sweeps, named, xs, states, lengths, checkpoints)
        ctx.sweeps, ctx.compile, ctx.checkpoints = sweeps, compile, checkpoints
        ctx.given = tuple(state is not None for state in states)
        ctx.save_for_backward(*params)
        return outputs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_outputs):
        sweeps = ctx.sweeps
        if ctx.checkpoints is None:
            params = dict(zip(sweeps.spec.params, ctx.saved_tensors, strict=True))
            grads = sweeps.backward_call(
                params, ctx.cache, d_outputs.contiguous(), None, None, True, None, compile=ctx.compile
            )
        else:
            kept, ctx.kept = ctx.kept, None  # the kept states go as each group's schedule frees them
            grads = _kept_backward(kept, d_outputs.contiguous())
        states = tuple(
            grads[name] if given else None for name, given in zip(sweeps.spec.states, ctx.given, strict=True)
        )
        return (None, None, None, None, None, *states, *(grads[name] for name in sweeps.spec.params))


class _SweepsModel(_Model):
    """Model of a module with reverse-time states: its forward runs _SweepsBPTT, with the batch's lengths (a reverse
    state starts at each sequence's own last step), in the memory checkpoints allows; truncate is refused."""

    _sweeps = None

    def _outputs(self, data, initial, params, padding):
        _refuse(truncate=self.truncate)
        sweeps, lengths = self._sweeps, padding.lengths
        return _SweepsBPTT.apply(
            sweeps, self.compile_steps, self.checkpoints, lengths, *data, *initial, *params.values()
        )


def _sweeps_model(sweeps, module):
    """The Model class of the generated module named `module`, whose _Sweeps is sweeps."""

    class Model(_SweepsModel):
        _passes, _sweeps, _inputs = sweeps.model_passes(), sweeps, tuple(sweeps.spec.states)

    Model.__module__, Model.__qualname__ = module, "Model"
    Model.__doc__ = (
        f"The model as an nn.Module: Model({', '.join(sweeps.spec.sizes)}, dtype=torch.float64, device=None, "
        "init_rng=None, checkpoints=None, compile=False); its parameters are nn.Parameters named as in PARAMS, and "
        "model(xs, initial states..., lengths=None) (xs a tensor or a PackedSequence) runs through the derived BPTT "
        "of its sweeps (checkpoints: in that memory, shared among the sweeps, as for loss_and_grads)."
    )
    return Model
