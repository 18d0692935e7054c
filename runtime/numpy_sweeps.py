"""A NumPy module of a model with reverse-time states: its groups of steps (each a forward-only model's _Passes)
run one after the other. Forward: each group reads the model's xs and the values of earlier groups (its side
reads), stacked on the rows, and hands its output (the value later groups read) on; a reverse group runs over
each sequence's own steps reversed (lengths=: steps lengths[b]-1 .. 0, its padding left in place), so that a
reverse state starts at its sequence's last step from its initial value. Backward runs the groups in reverse
order: a group's gradients of its side reads become the d_outputs of the groups that computed them."""

from dataclasses import dataclass

import numpy as np

from bptt.runtime.checks import _check_param_keys
from bptt.runtime.common import _extent, _param_sizes, _Spec
from bptt.runtime.numpy_padding import _data_padding, _read_padding

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


def _reversed_steps(array, lengths):
    """array (T, B, ...) with each sequence's own steps reversed (all T without lengths), padding in place."""
    if lengths is None:
        return array[::-1].copy()
    T = array.shape[0]
    steps = np.arange(T)[:, None]
    index = np.where(steps < lengths, lengths - 1 - steps, steps)
    return np.take_along_axis(array, index.reshape(index.shape + (1,) * (array.ndim - 2)), axis=0)


@dataclass(frozen=True, eq=False)
class _Sweeps:
    spec: _Spec
    sweeps: tuple
    losses_call: object  # the last group's losses: per step, the same in either direction

    def losses(self, outputs, ys, lengths=None, at=None):
        return self.losses_call(outputs, ys, lengths, at)

    def random_inputs(self, rng, T, B, dtype, sizes):
        first, last = self.sweeps[0].passes, self.sweeps[-1].passes
        xs = first.random_inputs(rng, T, B, dtype, sizes)[0]
        return xs, last.random_inputs(rng, T, B, dtype, dict(sizes))[1]

    def forward_mode_grads(self):
        raise ValueError(_REFUSED.format("forward_mode_grads"))

    def _params(self, sweep, params):
        """The group's parameters; the identity that stacks its output's values, if it stacks several."""
        mine = {name: params[name] for name in sweep.passes.spec.params if name != sweep.placement}
        if sweep.placement:
            first = params[self.spec.params[0]]
            rows = _extent(" + ".join(dim for _, dim in sweep.exposes), _param_sizes(self.spec, params))
            mine[sweep.placement] = np.eye(rows, dtype=first.dtype)
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

    def forward_call(self, params, xs, states, lengths=None):
        """(outputs, cache): each group's forward in turn, its cache kept; the last group's outputs."""
        _check_param_keys(self.spec, params)
        padding = _data_padding(lengths, xs)
        lengths = padding.lengths
        values, caches = {}, []
        outputs = None
        for sweep in self.sweeps:
            parts = ([np.asarray(xs)] if sweep.reads_input else []) + [values[name] for name in sweep.side]
            data = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)
            if sweep.reverse:
                data = _reversed_steps(data, lengths)
            passes = sweep.passes
            outputs, cache = passes.forward_call(
                self._params(sweep, params), data, None, self._states(passes, states), lengths
            )
            if sweep.reverse:
                outputs = _reversed_steps(outputs, lengths)
            for name, rows in self._rows(sweep, params).items():
                values[name] = outputs[..., rows]
            caches.append(cache)
        states = {
            name.removesuffix("0"): part[name.removesuffix("0")]
            for sweep, part in zip(self.sweeps, caches, strict=True)
            for name in sweep.passes.spec.states
        }  # each state in its group's time: the last final
        return outputs, {"sweeps": tuple(caches), "lengths": lengths, **states}

    def backward_call(self, params, cache, d_outputs, truncate, rng, check_finite, checkpoints):
        """The gradients: each group's backward, last group first, its side reads' gradients handed back."""
        for name, value in (("truncate", truncate), ("checkpoints", checkpoints)):
            if value is not None:
                raise ValueError(_REFUSED.format(f"{name}={value!r}"))
        if not (isinstance(cache, dict) and {"sweeps", "lengths"} <= set(cache)):
            raise ValueError("cache must be the dict that this model's forward returned")
        _check_param_keys(self.spec, params)
        lengths = cache["lengths"]
        flowing, grads = {}, {}
        for sweep, part in zip(reversed(self.sweeps), reversed(cache["sweeps"]), strict=True):
            d_out = d_outputs
            if sweep.exposes:  # a value no later group reads: zero
                rows = self._rows(sweep, params)
                blank = np.zeros(d_outputs.shape[:2] + (max(r.stop for r in rows.values()),), d_outputs.dtype)
                d_out = np.concatenate([flowing.pop(name, blank[..., rows[name]]) for name in rows], axis=-1)
            if sweep.reverse:
                d_out = _reversed_steps(d_out, lengths)
            passes = sweep.passes
            found = passes.backward_call(self._params(sweep, params), part, d_out, None, None, check_finite, None)
            found.pop(sweep.placement, None)
            for name in sweep.side:
                d_value = found.pop(name, None)
                if d_value is None:  # nothing flows back into it
                    continue
                d_value = _reversed_steps(d_value, lengths) if sweep.reverse else d_value
                flowing[name] = flowing[name] + d_value if name in flowing else d_value
            for key, value in found.items():
                grads[key] = grads[key] + value if key in grads else value
        return {key: grads[key] for key in (*self.spec.params, *self.spec.states)}

    def loss_and_grads_call(self, params, xs, ys, states, truncate, rng, checkpoints, lengths=None, at=None):
        """The loss of the last group's outputs (each sequence's own steps, or its last with at="last"), averaged
        over the batch, and the gradients of backward_call."""
        for name, value in (("truncate", truncate), ("checkpoints", checkpoints)):
            if value is not None:
                raise ValueError(_REFUSED.format(f"{name}={value!r}"))
        outputs, cache = self.forward_call(params, xs, states, lengths)
        last = self.sweeps[-1].passes
        padding = _data_padding(lengths, xs)
        read = _read_padding(padding, at, xs)
        s, y, _ = last.loss_inputs(outputs, ys, lengths, at)
        T, B = outputs.shape[:2]
        count = (T * B if self.spec.mean else B) if read.valid is None else read.counts(self.spec.mean, s.dtype)
        s = s.copy()
        loss = last.loss(s, y, count)  # s becomes dL/doutputs
        return loss, self.backward_call(params, cache, s, None, None, True, None)
