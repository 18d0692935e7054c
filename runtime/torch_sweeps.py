"""A torch module of a model with reverse-time states (sweeps.py): its tensors stacked, reversed and made in torch,
on the parameters' device; compile= passed on to every group."""

import torch

from bptt.runtime.checks import _checked
from bptt.runtime.sweep_checkpoints import _kept_backward, _kept_forward
from bptt.runtime.sweep_checks import _checked_call
from bptt.runtime.sweeps import _Composed, _own, _refuse_combined
from bptt.runtime.torch import _check_compile, _truncation
from bptt.runtime.torch_autograd import _Model
from bptt.runtime.torch_checks import _blamed
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
        return _checked(passes, params, xs, ys, states, False, ys is not None, False)

    def itemsize(self, dtype):
        return dtype.itemsize

    def keep_weights(self, truncation, T, rng, like):
        return _truncation_weights(truncation, T, rng, like)

    def steps_joined(self, parts):
        return torch.cat(parts, dim=0)

    @torch.no_grad()
    def checkpointed_loss(self, params, x, ys, states, checkpoints, lengths, at, **options):
        _check_compile(options.get("compile", False), checkpoints)
        return super().checkpointed_loss(params, x, ys, states, checkpoints, lengths, at)

    def at_steps(self, array, steps):
        return array[steps.to(array.device), torch.arange(array.shape[1], device=array.device)]

    blamed = staticmethod(_blamed)

    def run_forward(self, passes, params, data, states, lengths, options):
        compile = _check_compile(options.get("compile", False))
        padding, sizes, dtype, x, initial = self._group_arguments(passes, params, data, states, lengths)
        return padding.stopped(
            passes.spec, *passes.run_forward(params, sizes, dtype, x.device, x, None, initial, compile)
        )

    def run_backward(self, passes, params, cache, d_outputs, check_finite, options):
        if options.get("checkpoints") is not None:
            _check_compile(options.get("compile", False), options["checkpoints"])
            return self.segmented_backward(passes, params, cache, d_outputs, check_finite, options["checkpoints"])
        compile, truncate, rng = options.get("compile", False), options.get("truncate"), options.get("rng")
        return passes.backward_call(params, cache, d_outputs, truncate, rng, check_finite, None, compile)

    def truncation(self, truncate, rng):
        return _truncation(truncate, rng)

    def group_rngs(self, rng, count):
        seeds = torch.randint(0, 2**62, (count,), generator=rng, device=rng.device)
        return [torch.Generator(device=rng.device).manual_seed(int(seed)) for seed in seeds]

    @torch.no_grad()
    def segmented_backward(self, passes, params, cache, d_outputs, check_finite, checkpoints):
        return super().segmented_backward(passes, params, cache, d_outputs, check_finite, checkpoints)

    def init_params(self, rng, dtype, device, sizes):
        return self.model_passes().init_params(rng, dtype, device, sizes)

    def random_inputs(self, rng, T, B, dtype, device, sizes):
        """xs of the first group's kind, ys of the last's."""
        xs = self.sweeps[0].passes.random_inputs(rng, T, B, dtype, device, _own(self.sweeps[0].passes, sizes))[0]
        ys = self.sweeps[-1].passes.random_inputs(rng, T, B, dtype, device, _own(self.sweeps[-1].passes, sizes))[1]
        return xs, ys


class _SweepsBPTT(torch.autograd.Function):
    """The outputs of a model with reverse-time states, whose backward runs the groups' derived BPTT:
    _SweepsBPTT.apply(sweeps, compile, (truncate, rng, checkpoints), lengths, xs, *initial states, *params); with
    checkpoints, each group's forward pass keeps its schedule's states only (sweep_checkpoints.py)."""

    @staticmethod
    def forward(ctx, sweeps, compile, options, lengths, xs, *values):
        states, params = values[: len(sweeps.spec.states)], values[len(sweeps.spec.states) :]
        named = dict(zip(sweeps.spec.params, params, strict=True))
        truncate, rng, checkpoints = options
        if checkpoints is None:
            outputs, ctx.cache = sweeps.forward_call(named, xs, states, lengths, compile=compile)
        else:
            x, lengths = _checked_call(sweeps, named, xs, None, states, lengths, None, True)
            outputs, ctx.kept = _kept_forward(sweeps, named, x, states, lengths, checkpoints)
        ctx.sweeps, ctx.compile, ctx.truncation, ctx.checkpoints = sweeps, compile, (truncate, rng), checkpoints
        ctx.given = tuple(state is not None for state in states)
        ctx.save_for_backward(*params)
        return outputs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_outputs):
        sweeps = ctx.sweeps
        if ctx.checkpoints is None:
            params = dict(zip(sweeps.spec.params, ctx.saved_tensors, strict=True))
            truncate, rng = ctx.truncation
            grads = sweeps.backward_call(
                params, ctx.cache, d_outputs.contiguous(), truncate, rng, True, None, compile=ctx.compile
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
    state starts at each sequence's own last step), truncated as its truncate and rng say, in the memory checkpoints
    allows (truncate= with checkpoints= refused)."""

    _sweeps = None

    def _outputs(self, data, initial, params, padding):
        _refuse_combined(self.truncate, self.checkpoints)
        options = (self.truncate, self.rng, self.checkpoints)
        return _SweepsBPTT.apply(
            self._sweeps, self.compile_steps, options, padding.lengths, *data, *initial, *params.values()
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
