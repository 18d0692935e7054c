"""A module of a model with reverse-time states, framework-free: its groups of steps (each a forward-only model's
_Passes) run one after the other. Forward: each group reads the model's xs and the values of earlier groups (its
side reads), stacked on the rows, and hands its output (the values later groups read) on; a reverse group runs over
each sequence's own steps reversed (lengths=: steps lengths[b]-1 .. 0, its padding left in place), so that a reverse
state starts at its sequence's last step from its initial value. Backward runs the groups in reverse order: a
group's gradients of its side reads become the d_outputs of the groups that computed them; truncate= truncates each
group's own steps (a reverse group's chunks counted from each sequence's last step). A backend's file
(numpy_sweeps.py, torch_sweeps.py) says how its arrays are stacked, reversed and made, and how its passes are
called."""

import dataclasses
from dataclasses import dataclass

from bptt.runtime.checks import _checked
from bptt.runtime.common import _extent, _param_sizes, _Spec
from bptt.runtime.options import _Checkpoints
from bptt.runtime.sweep_checkpoints import _checkpointed_loss_and_grads, _segmented_backward
from bptt.runtime.sweep_checks import _checked_cache, _checked_call, _own_keys

_REFUSED = "with reverse-time states, {} is not supported yet (full BPTT, without it, is)"


@dataclass(frozen=True)
class _Sweep:
    """One group of steps: its module's _Passes, whether it runs reversed, whether its input stacks the model's
    xs first, the names of its side reads (stacked after), the values its output stacks ((name, rows), ...; none for
    the last), and the parameter that stacks several (given as the identity, its gradient unused), or None."""

    passes: object
    reverse: bool
    reads_input: bool
    side: tuple
    exposes: tuple
    placement: str | None = None


def _refuse(**options):
    """ValueError in one line naming the first option given (not None)."""
    for name, value in options.items():
        if value is not None:
            raise ValueError(_REFUSED.format(f"{name}={value!r}"))


def _refuse_combined(truncate, checkpoints):
    """ValueError in one line if both truncate and checkpoints are given (each alone works)."""
    if truncate is not None and checkpoints is not None:
        raise ValueError("with reverse-time states, truncate= and checkpoints= do not combine yet: give one of them")


@dataclass(frozen=True, eq=False)
class _Composed:
    """The groups of a model and its own _Spec; the last group's losses (per step: the same in either direction)."""

    spec: _Spec
    sweeps: tuple
    losses_call: object

    # a backend's hooks
    def stacked(self, parts):
        raise NotImplementedError

    def reversed_steps(self, array, lengths):
        raise NotImplementedError

    def zeros(self, shape, like):
        raise NotImplementedError

    def identity(self, rows, like):
        raise NotImplementedError

    # checkpoints= (sweep_checkpoints.py): a group's arguments checked, (sizes, dtype, x, y, initial states); the
    # bytes of a dtype's item; keep's weights (None: every flow kept); arrays of consecutive steps joined
    def checked(self, passes, params, xs, ys, states):
        raise NotImplementedError

    def itemsize(self, dtype):
        raise NotImplementedError

    def keep_weights(self, truncation, T, rng, like):
        return None

    def steps_joined(self, parts):
        raise NotImplementedError

    padding = read_padding = cache_padding = None  # the backend's _data_padding, _read_padding, _cache_padding

    def at_steps(self, array, steps):
        """array (T+1, B, ...) at step steps[b] of each sequence b: (B, ...)."""
        raise NotImplementedError

    def holds(self, condition):
        """Whether a 0-d boolean array is true (JAX's: true if traced, its value not known until it runs)."""
        return bool(condition)

    padding = read_padding = None  # the backend's _data_padding and _read_padding (its *_padding.py)
    scans_params = False  # loss_and_grads scans the parameters (JAX's: every call is checked in full)

    def blamed(self, spec, params, loss, grads):
        """(loss, grads) of loss_and_grads, a parameter holding nan or inf named from them (the backend's _blamed)."""
        return loss, grads

    def ragged(self, lengths, T):
        """Whether some sequence is shorter than T (a reverse group then reverses each sequence's own steps)."""
        return lengths is not None and bool((lengths < T).any())

    def loss_count(self, lengths, at, xs, outputs):
        """What segment_loss divides by: T (it makes T*B or B of it), or each step's and sample's divisor."""
        read = self.read_padding(self.padding(lengths, xs), at, xs)
        return outputs.shape[0] if read.valid is None else read.counts(self.spec.mean, outputs.dtype)

    def run_forward(self, passes, params, data, states, lengths, options):
        """(outputs, cache) of a group's forward pass (the backend's)."""
        raise NotImplementedError

    def _group_arguments(self, passes, params, data, states, lengths):
        """(padding, sizes, dtype, x, initial states) of a group's forward pass, its arrays as the model's checks
        passed them (zero at padded steps): bound, not checked again nor scanned."""
        padding = self.padding(lengths, data)
        sizes, dtype, x, _, initial = _checked(passes, params, data, None, states, False, False, False)
        return padding, sizes, dtype, x, initial

    def run_backward(self, passes, params, cache, d_outputs, check_finite, options):
        if options.get("checkpoints") is not None:
            return self.segmented_backward(passes, params, cache, d_outputs, check_finite, options["checkpoints"])
        truncate, rng = options.get("truncate"), options.get("rng")
        return passes.backward_call(params, cache, d_outputs, truncate, rng, check_finite, None)

    def truncation(self, truncate, rng):
        """The _Truncation of a truncate argument, rng checked for random truncation (the backend's _truncation)."""
        raise NotImplementedError

    def group_rngs(self, rng, count):
        """count generators of the backend's kind, drawn from rng once per call (one each group, in the order the
        groups run forward), from which each group draws its random truncation's weights."""
        raise NotImplementedError

    def segmented_backward(self, passes, params, cache, d_outputs, check_finite, checkpoints):
        """A group's backward in segments (its backward arrays in that memory: the groups' backward passes run one
        after the other, so each may use the whole budget)."""
        return _segmented_backward(self, passes, params, cache, d_outputs, check_finite, _Checkpoints.of(checkpoints))

    # what every backend's module calls
    def losses(self, outputs, ys, lengths=None, at=None):
        return self.losses_call(outputs, ys, lengths, at)

    def forward_mode_grads(self):
        raise ValueError(_REFUSED.format("forward_mode_grads"))

    def _params(self, sweep, params):
        """The group's parameters; the identity that stacks its output's values, if it stacks several."""
        mine = {name: params[name] for name in sweep.passes.spec.params if name != sweep.placement}
        if sweep.placement:
            rows = _extent(" + ".join(dim for _, dim in sweep.exposes), _param_sizes(self.spec, params))
            mine[sweep.placement] = self.identity(rows, params[self.spec.params[0]])
        return mine

    def _rows(self, sweep, params):
        """{exposed value: its slice of the group's output}."""
        sizes, out, start = _param_sizes(self.spec, params), {}, 0
        for name, dim in sweep.exposes:
            out[name] = slice(start, start + _extent(dim, sizes))
            start = out[name].stop
        return out

    def _states(self, passes, states):
        given = dict(zip(self.spec.states, states, strict=True))
        return tuple(given[name] for name in passes.spec.states)

    def model_passes(self):
        """The last group's passes with the model's spec: what checks the model's arguments (once, in the user's
        names, before any group runs), draws its parameters and takes its loss."""
        made = self.__dict__.get("_model_passes")
        if made is None:
            made = dataclasses.replace(self.sweeps[-1].passes, spec=self.spec)
            object.__setattr__(self, "_model_passes", made)
        return made

    def forward_call(self, params, xs, states, lengths=None, **options):
        """(outputs, cache): the arguments checked, then each group's forward in turn (_forward)."""
        x, lengths = _checked_call(self, params, xs, None, states, lengths, None, True)
        return self._forward(params, x, states, lengths, options)

    def _forward(self, params, xs, states, lengths, options):
        """(outputs, cache): each group's forward in turn, its cache kept; the last group's outputs. The cache
        holds the input, each state as its group holds it (a reverse one in its group's reversed steps: its last
        the final), group k's other arrays under keys "sweep<k>.<its key>", and the lengths if given."""
        steps = lengths if self.ragged(lengths, xs.shape[0]) else None  # what a reverse group reverses by
        values, caches, outputs = {}, [], None
        for sweep in self.sweeps:
            parts = ([xs] if sweep.reads_input else []) + [values[name] for name in sweep.side]
            data = parts[0] if len(parts) == 1 else self.stacked(parts)
            if sweep.reverse:
                data = self.reversed_steps(data, steps)
            passes, mine = sweep.passes, self._params(sweep, params)
            outputs, cache = self.run_forward(passes, mine, data, self._states(passes, states), lengths, options)
            if sweep.reverse:
                outputs = self.reversed_steps(outputs, steps)
            for name, rows in self._rows(sweep, params).items():
                values[name] = outputs[..., rows]
            caches.append(cache)
        states = {
            name.removesuffix("0"): part[name.removesuffix("0")]
            for sweep, part in zip(self.sweeps, caches, strict=True)
            for name in sweep.passes.spec.states
        }
        parts = {
            f"sweep{k}.{key}": part[key] for k, part in enumerate(caches, start=1) for key in _own_keys(self, k - 1)
        }
        given = {next(iter(self.spec.cache)): xs}  # the input, as CACHE names it
        return outputs, {**given, **states, **parts, **({} if lengths is None else {"lengths": lengths})}

    def backward_call(self, params, cache, d_outputs, truncate, rng, check_finite, checkpoints, **options):
        """The gradients: each group's backward, last group first, its side reads' gradients handed back; truncate
        as each group's backward truncates its own steps (_truncated); with checkpoints, each group's backward arrays
        in segments of steps that fit in that memory (the groups' backward passes run one after the other)."""
        _refuse_combined(truncate, checkpoints)
        parts, lengths = _checked_cache(self, params, cache, d_outputs, check_finite)
        options = options if checkpoints is None else dict(options, checkpoints=checkpoints)
        if lengths is not None and hasattr(d_outputs, "shape") and not self.ragged(lengths, d_outputs.shape[0]):
            lengths = None  # every sequence T steps: a reverse group reverses all T
        flowing, grads = {}, {}
        truncated = self._truncated(truncate, rng, options)
        for sweep, part, options in zip(reversed(self.sweeps), reversed(parts), reversed(truncated), strict=True):
            d_out = d_outputs
            if sweep.exposes:  # a value no later group reads: zero
                rows = self._rows(sweep, params)
                blank = self.zeros(tuple(d_outputs.shape[:2]) + (max(r.stop for r in rows.values()),), d_outputs)
                d_out = self.stacked([flowing.pop(name, blank[..., rows[name]]) for name in rows])
            if sweep.reverse:
                d_out = self.reversed_steps(d_out, lengths)
            passes = sweep.passes
            found = dict(self.run_backward(passes, self._params(sweep, params), part, d_out, False, options))
            found.pop(sweep.placement, None)
            for name in sweep.side:
                d_value = found.pop(name, None)
                if d_value is None:  # nothing flows back into it
                    continue
                d_value = self.reversed_steps(d_value, lengths) if sweep.reverse else d_value
                flowing[name] = flowing[name] + d_value if name in flowing else d_value
            for key, value in found.items():
                grads[key] = grads[key] + value if key in grads else value
        return {key: grads[key] for key in (*self.spec.params, *self.spec.states)}

    def _truncated(self, truncate, rng, options):
        """Each group's options with its truncate and rng: a group's backward truncates its own steps (a reverse
        group's run from each sequence's last step back), and random truncation draws each group's weights from a
        generator of its own (group_rngs), so that each weight is drawn independently, once per call."""
        truncation = self.truncation(truncate, rng)
        rngs = self.group_rngs(rng, len(self.sweeps)) if truncation.randomized else [None] * len(self.sweeps)
        return [{**options, "truncate": truncation.argument, "rng": mine} for mine in rngs]

    def loss_and_grads_call(self, params, xs, ys, states, truncate, rng, checkpoints, lengths=None, at=None, **options):
        """The loss of the last group's outputs (each sequence's own steps, or its last with at="last"), averaged
        over the batch, and the gradients of backward_call; with checkpoints, in that memory, shared among the
        groups (sweep_checkpoints.py)."""
        _refuse_combined(truncate, checkpoints)
        self.truncation(truncate, rng)  # a bad truncate or rng fails before the forward pass
        x, lengths = _checked_call(self, params, xs, ys, states, lengths, at, self.scans_params)
        if checkpoints is not None:
            loss, grads = self.checkpointed_loss(params, x, ys, states, checkpoints, lengths, at, **options)
            return self.blamed(self.spec, params, loss, grads)
        loss, grads_of = self._loss_and_backward(params, xs, x, ys, states, lengths, at, options)
        return self.blamed(self.spec, params, loss, grads_of(truncate, rng))

    def loss_and_backward(self, params, xs, ys, states, lengths=None, at=None, **options):
        """(loss, grads_of): loss_and_grads's loss and, as grads_of(truncate, rng), its gradients truncated so: one
        forward pass for the backward passes of many truncations (app/verify/check.py's keep patterns)."""
        x, lengths = _checked_call(self, params, xs, ys, states, lengths, at, self.scans_params)
        return self._loss_and_backward(params, xs, x, ys, states, lengths, at, options)

    def _loss_and_backward(self, params, xs, x, ys, states, lengths, at, options):
        """(loss, grads_of) of the checked arguments (x: xs as checked, lengths as _checked_call returns them)."""
        outputs, cache = self._forward(params, x, states, lengths, options)
        last = self.sweeps[-1].passes
        s, y, _ = last.loss_inputs(outputs, ys, lengths, at)
        count = self.loss_count(lengths, at, xs, s)
        loss, d_outputs = last.segment_loss(s, y, count)
        return loss, lambda truncate, rng: self.backward_call(
            params, cache, d_outputs, truncate, rng, False, None, **options
        )

    def checkpointed_loss(self, params, x, ys, states, checkpoints, lengths, at, **options):
        """(loss, grads) of loss_and_grads(checkpoints=...), its arguments checked (x: xs as checked)."""
        return _checkpointed_loss_and_grads(self, params, x, ys, states, checkpoints, lengths, at)


def _own(passes, sizes):
    """The sizes a group's spec names, as the model's (a stacked input's drawn with one row: only the model's
    input and targets are drawn)."""
    return {name: sizes.get(name, 1) for name in passes.spec.sizes}
