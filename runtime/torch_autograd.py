"""A generated torch module's autograd glue, built from its _Passes (torch_passes.py) by _autograd: its BPTT,
CompiledBPTT and CheckpointedBPTT, torch.autograd.Functions whose backward is the derived BPTT, and its Model,
an nn.Module; each a class of the module (pickled by reference as its own), taking the model's arguments.
The loss as a Function (Model.loss) is the runtime's."""

import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from bptt.runtime.checkpoints import _checkpointed, _forward_kept
from bptt.runtime.checks import _checked
from bptt.runtime.common import _bind_sizes
from bptt.runtime.options import _Checkpoints
from bptt.runtime.torch import _check_compile, _loss_parts, _truncation
from bptt.runtime.torch_padding import _data_padding
from bptt.runtime.torch_passes import _truncation_weights

XS_REQUIRES_GRAD = (
    "xs requires grad: the derived BPTT gives gradients for the parameters and initial states, not for the inputs;"
    " detach xs (layers in front of the model would get no gradient)"
)


def _bptt_forward(passes, ctx, truncate, rng, xs, ys, states, params, compile=False):
    """BPTT.forward: the outputs, what its backward reads kept in ctx."""
    if getattr(xs, "requires_grad", False):
        raise ValueError(XS_REQUIRES_GRAD)
    named = dict(zip(passes.spec.params, params, strict=True))
    sizes = _bind_sizes(passes.spec, named, passes.spec.params)[0]
    outputs, cache = passes.run_forward(named, sizes, params[0].dtype, params[0].device, xs, ys, states, compile)
    ctx.passes, ctx.compile = passes, compile
    ctx.truncation = (_truncation(truncate, rng), rng)
    ctx.given = tuple(state is not None for state in states)
    ctx.sizes, ctx.cache = sizes, cache
    ctx.save_for_backward(*params)
    return outputs


def _checkpointed_forward(passes, ctx, checkpoints, truncate, rng, xs, ys, states, params):
    """CheckpointedBPTT.forward: the outputs, only the states the schedule's first forward pass keeps kept."""
    if getattr(xs, "requires_grad", False):
        raise ValueError(XS_REQUIRES_GRAD)
    named = dict(zip(passes.spec.params, params, strict=True))
    sizes = _bind_sizes(passes.spec, named, passes.spec.params)[0]
    sizes.update(T=xs.shape[0], B=xs.shape[1])
    truncation = _truncation(truncate, rng)
    checkpoints, dtype = _Checkpoints.of(checkpoints), params[0].dtype
    outputs = _Steps(xs.shape[0])
    args = (truncation, named, sizes, dtype, xs, ys, states, checkpoints, dtype.itemsize, outputs)
    _, kept = _forward_kept(passes, *args)
    ctx.passes, ctx.inputs = passes, (xs, ys, states, kept, checkpoints, truncation, rng)
    ctx.sizes, ctx.given = sizes, tuple(state is not None for state in states)
    ctx.save_for_backward(*params)
    return outputs.tensor


def _handed_back(ctx, grads, leading):
    """What a Function's backward returns: None for its `leading` arguments, then the initial states'
    gradients (None for a state not given), then the parameters'."""
    states = tuple(
        grads[name] if given else None for name, given in zip(ctx.passes.spec.states, ctx.given, strict=True)
    )
    return (None,) * leading + states + tuple(grads[name] for name in ctx.passes.spec.params)


def _data_count(passes):
    """The data arguments a Function takes before the states: xs, and ys when teacher-forced."""
    return 2 if passes.spec.forced else 1


class _BPTT(torch.autograd.Function):
    """What a module's BPTT and CompiledBPTT share: the backward, the derived BPTT (their forward hands the
    module's signature to _bptt_forward)."""

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_outputs):
        passes = ctx.passes
        params = dict(zip(passes.spec.params, ctx.saved_tensors, strict=True))
        truncation, rng = ctx.truncation
        grads = passes.backward(truncation, rng, params, ctx.sizes, ctx.cache, d_outputs.contiguous(), ctx.compile)
        return _handed_back(ctx, grads, 2 + _data_count(passes))


class _CheckpointedBPTT(torch.autograd.Function):
    """A module's CheckpointedBPTT's backward: the schedule's recomputation, freeing what it frees."""

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_outputs):
        passes = ctx.passes
        params = dict(zip(passes.spec.params, ctx.saved_tensors, strict=True))
        xs, ys, states, kept, checkpoints, truncation, rng = ctx.inputs
        ctx.inputs = None  # the kept states go as the schedule frees them
        keep = _truncation_weights(truncation, xs.shape[0], rng, d_outputs)
        dtype = d_outputs.dtype
        args = (params, ctx.sizes, dtype, xs, ys, states, checkpoints, dtype.itemsize, d_outputs.contiguous(), kept)
        _, grads = _checkpointed(passes, truncation, keep, *args)
        return _handed_back(ctx, grads, 3 + _data_count(passes))


class _Loss(torch.autograd.Function):
    """Model.loss: the loss averaged as loss_and_grads averages it, and in backward the derived dL/doutputs,
    each a part of _LOSS_PART bytes of the outputs at a time: nothing of all T steps but the gradient."""

    @staticmethod
    def forward(ctx, passes, outputs, ys, counts=None):
        ctx.passes, ctx.counts = passes, counts
        ctx.save_for_backward(outputs, ys)
        loss = 0
        for part in _loss_parts(outputs):
            loss = loss + passes.segment_loss(outputs[part], ys[part], _divisors(outputs, counts, part))[0]
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_loss):
        outputs, ys = ctx.saved_tensors
        d_outputs = torch.empty_like(outputs)
        for part in _loss_parts(outputs):
            divisors = _divisors(outputs, ctx.counts, part)
            d_outputs[part] = ctx.passes.segment_loss(outputs[part], ys[part], divisors)[1]
        return None, d_outputs.mul_(d_loss), None, None


def _divisors(outputs, counts, part):
    """What segment_loss divides a part of the steps' losses by: all T steps' count, or each step's and sample's
    divisor (counts, lengths=)."""
    return outputs.shape[0] if counts is None else counts[part]


class _Model(torch.nn.Module):
    """A module's Model: its parameters are nn.Parameters named as in PARAMS, its forward runs through the
    module's BPTT (CheckpointedBPTT with checkpoints, CompiledBPTT with compile=True)."""

    _passes, _functions, _inputs = None, (), ()  # the module's _Passes, its Functions, forward's inputs after xs

    def __init__(
        self,
        *sizes,
        dtype=torch.float64,
        device=None,
        truncate=None,
        rng=None,
        init_rng=None,
        checkpoints=None,
        compile=False,
        **named,
    ):
        names = self._passes.spec.sizes
        if len(sizes) > len(names):
            raise TypeError(f"Model takes the sizes {', '.join(names)} and keywords; got {len(sizes)} sizes")
        super().__init__()
        _truncation(truncate, rng)
        if checkpoints is not None:
            _Checkpoints.of(checkpoints)  # a bad value fails here, in one line (a byte budget is checked per call)
        self.truncate, self.rng, self.checkpoints = truncate, rng, checkpoints
        self.compile_steps = _check_compile(compile, checkpoints)  # not .compile: nn.Module.compile is a method
        sizes = dict(zip(names, sizes, strict=False)) | named  # by position or by name; init_params checks them
        for name, value in self._passes.init_params(init_rng, dtype, device, sizes).items():
            self.register_parameter(name, torch.nn.Parameter(value))

    def params(self):
        """The parameters as the dict the functions take."""
        return {name: getattr(self, name) for name in self._passes.spec.params}

    def forward(self, xs, *inputs, **named):
        """The outputs, shape (T, B, rows): model(xs, [ys,] initial states..., lengths=None), the states by position
        or by name (None: zero); shapes, dtype and device are checked (not finiteness). lengths as for the module's
        forward: the outputs are zero at padded steps, which get zero gradient. xs may be a PackedSequence instead
        (as nn.LSTM takes it; its lengths, no lengths=; ys and states in the batch's own order): the outputs are
        then packed the same way."""
        lengths = named.pop("lengths", None)
        packed = xs if isinstance(xs, PackedSequence) else None
        if packed is not None:
            if lengths is not None:
                raise ValueError("lengths= with a PackedSequence xs: it carries its own lengths; give one or the other")
            xs, lengths = pad_packed_sequence(packed)  # (T, B, ...) in the batch's own order, and its lengths
        given = dict(zip(self._inputs, inputs, strict=False)) | named
        missing = "ys" in self._inputs and "ys" not in given
        if len(inputs) > len(self._inputs) or set(given) - set(self._inputs) or missing:
            raise TypeError(
                f"Model.forward takes xs, {', '.join(self._inputs)}; got {len(inputs) + 1} and {sorted(named)}"
            )
        ys, states = given.get("ys"), tuple(given.get(name) for name in self._passes.spec.states)
        params = self.params()
        if getattr(xs, "requires_grad", False):
            raise ValueError(XS_REQUIRES_GRAD)
        padding = _data_padding(lengths, xs)
        xs, ys = padding.zeroed(xs), padding.zeroed(ys)
        _, _, x, y, initial = _checked(self._passes, params, xs, ys, states, False, False, finite_data=False)
        data = (x, y) if self._passes.spec.forced else (x,)
        outputs = padding.zeroed(self._outputs(data, initial, params, padding))  # zero dL/doutputs at padded steps
        return outputs if packed is None else _packed_like(outputs, packed)

    def _outputs(self, data, initial, params, padding):
        """The outputs of the checked data and initial states, through the module's BPTT."""
        bptt, compiled, checkpointed = self._functions
        if self.checkpoints is not None:
            return checkpointed.apply(self.checkpoints, self.truncate, self.rng, *data, *initial, *params.values())
        function = compiled if self.compile_steps else bptt
        return function.apply(self.truncate, self.rng, *data, *initial, *params.values())

    def loss(self, outputs, ys, lengths=None, at=None):
        """The loss averaged over the batch, as loss_and_grads computes it (differentiable: _Loss); lengths as for
        forward (each sequence's loss is that of its own steps), at as for loss_and_grads ("last": of its last).
        outputs may be packed, as forward returns them for a PackedSequence (their lengths, no lengths=; ys padded,
        in the batch's own order, as forward takes them)."""
        if isinstance(outputs, PackedSequence):
            if lengths is not None:
                raise ValueError("lengths= with packed outputs: they carry their own lengths; give one or the other")
            steps = ys.shape[0] if torch.is_tensor(ys) and ys.dim() > 0 else None
            outputs, lengths = pad_packed_sequence(outputs, total_length=steps)  # the batch's own order
        outputs, ys, padding = self._passes.loss_inputs(outputs, ys, lengths, at)
        counts = None if padding.valid is None else padding.counts(self._passes.spec.mean, outputs.dtype)
        return _Loss.apply(self._passes, outputs, ys, counts)


def _packed_like(outputs, packed):
    """outputs (T, B, rows), in the batch's own order, packed as the PackedSequence packed is (its batch_sizes,
    sorted_indices and unsorted_indices), differentiably."""
    order = packed.sorted_indices
    if order is not None:
        outputs = outputs.index_select(1, order)
    steps = (packed.batch_sizes[None, :] > torch.arange(outputs.shape[1])[:, None]).sum(dim=1)  # sorted lengths
    data = pack_padded_sequence(outputs, steps, enforce_sorted=True).data
    return PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)


class _Steps:
    """The outputs of all T steps in one tensor, each part copied in as _forward_kept appends it (no list
    of parts beside their concatenation)."""

    def __init__(self, T):
        self.T, self.filled, self.tensor = T, 0, None

    def append(self, part):
        if self.tensor is None:
            self.tensor = part.new_empty((self.T, *part.shape[1:]))
        self.tensor[self.filled : self.filled + part.shape[0]] = part
        self.filled += part.shape[0]


def _autograd(passes, module):
    """(BPTT, CompiledBPTT, CheckpointedBPTT, Model) of the generated module named `module`, whose _Passes is
    passes: their apply and forward take the model's data and initial states, in the module's order."""
    spec = passes.spec
    data = ("xs", "ys") if spec.forced else ("xs",)
    inputs = ", ".join((*data, *spec.states))

    def split(values):
        """(xs, ys or None, initial states, parameters) of a Function's inputs."""
        states = values[len(data) : len(data) + len(spec.states)]
        return values[0], values[1] if spec.forced else None, states, values[len(data) + len(spec.states) :]

    class BPTT(_BPTT):
        @staticmethod
        def forward(ctx, truncate, rng, *values):
            return _bptt_forward(passes, ctx, truncate, rng, *split(values))

    class CompiledBPTT(_BPTT):
        @staticmethod
        def forward(ctx, truncate, rng, *values):
            return _bptt_forward(passes, ctx, truncate, rng, *split(values), compile=True)

    class CheckpointedBPTT(_CheckpointedBPTT):
        @staticmethod
        def forward(ctx, checkpoints, truncate, rng, *values):
            return _checkpointed_forward(passes, ctx, checkpoints, truncate, rng, *split(values))

    class Model(_Model):
        _passes, _functions, _inputs = passes, (BPTT, CompiledBPTT, CheckpointedBPTT), data[1:] + tuple(spec.states)

    docs = {
        BPTT: _BPTT_DOC.format(inputs=inputs, data=" and ".join(data)),
        CompiledBPTT: f"BPTT, each step through torch.compile: CompiledBPTT.apply(truncate, rng, {inputs}, *params).",
        CheckpointedBPTT: _CHECKPOINTED_DOC.format(inputs=inputs),
        Model: _MODEL_DOC.format(sizes=", ".join(spec.sizes), inputs=inputs),
    }
    for cls, doc in docs.items():
        cls.__module__, cls.__qualname__, cls.__doc__ = module, cls.__name__, doc
    return BPTT, CompiledBPTT, CheckpointedBPTT, Model


_BPTT_DOC = """The model's outputs as a torch.autograd.Function whose backward is the derived BPTT.

BPTT.apply(truncate, rng, {inputs}, *params) with params in PARAMS order and truncate, rng as for backward
(None, None: full BPTT). The initial states get gradients when given (None: zero); {data} get none (the
derivation is with respect to parameters and states), so xs that requires grad (a layer in front of the
model) is refused rather than left without a gradient."""
_CHECKPOINTED_DOC = """BPTT in bounded memory: CheckpointedBPTT.apply(checkpoints, truncate, rng, {inputs}, *params), as
BPTT.apply with checkpoints as for loss_and_grads. The forward pass keeps only the states the schedule keeps
in its first forward pass; the backward pass recomputes the rest, and frees what the schedule frees."""
_MODEL_DOC = """The model as an nn.Module: Model({sizes}, dtype=torch.float64, device=None, truncate=None, rng=None,
init_rng=None, checkpoints=None, compile=False); its parameters are nn.Parameters named as in PARAMS, and
model({inputs}) runs through BPTT, so loss.backward() gives the derived gradients (truncate, rng as for
backward; checkpoints as for loss_and_grads, through CheckpointedBPTT; compile through CompiledBPTT)."""
