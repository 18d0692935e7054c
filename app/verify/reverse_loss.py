"""The truncated loss of a model with reverse-time states: the loss whose exact gradient is what backward(...,
truncate) computes, built from the semantics (README, "Truncation and forward mode"), not from any backward pass.

Such a module runs groups of steps one after the other (runtime/sweeps.py), each a forward-only recursion, a
reverse one over each sequence's own steps reversed; a group reads the model's input and the values of earlier
groups at the same step. Each recursion is truncated in its own time, each sequence alone on its own steps:
- chunk:K: the state entering each chunk of K of the group's own steps (a reverse group's counted from the
  sequence's last step) is held at its value in an unperturbed run;
- window:K: the group's value at its own step j is recomputed from its state at step j-K-1, held at its
  unperturbed value (from the initial state if j <= K), reading the values of earlier groups each so recomputed in
  its own group. Its gradient is the windowed backward's: what a value at step j hands back to an earlier group's
  value at step t flows back at most K of the later group's steps, and then at most K of the earlier group's.
The values are computed by the NumPy module's own forward passes of each group."""

import numpy as np

from bptt.runtime.options import Truncation


def groups_of(module):
    """The composed groups (runtime/sweeps.py's _Composed) of a module with reverse-time states, or None: the NumPy
    module's, for a framework's module too (the loss is computed in NumPy, float64)."""
    return getattr(getattr(module, "reference", module), "_SWEEPS", None)


def truncated_losses(instance, truncate):
    """The batch-averaged truncated loss of each set of the instance (app/verify/problem.py), shape (sets,)."""
    composed, truncation = groups_of(instance.module), Truncation.of(truncate)
    steps, batch = instance.xs.shape[:2]
    own = np.full(batch, steps) if instance.lengths is None else np.asarray(instance.lengths)
    total = np.zeros(instance.sets)
    for b in range(batch):
        outputs = _sequence_outputs(composed, instance, b, int(own[b]), truncation)
        ys = instance.ys[: own[b], b * instance.sets : (b + 1) * instance.sets]
        scores = instance.scores(outputs, ys)[:, 0]  # (own steps, sets)
        total += scores.sum(0) / (own[b] if instance.module.MEAN else 1)  # a mean: over the sequence's own steps
    return total / batch


def _sequence_outputs(composed, instance, b, steps, truncation):
    """The last group's outputs of sequence b alone over its own steps (steps, 1, width), each group truncated."""
    values, outputs = {}, None
    for sweep in composed.sweeps:
        parts = ([instance.xs[:steps, b : b + 1]] if sweep.reads_input else []) + [values[n] for n in sweep.side]
        data = np.concatenate(parts, axis=-1)
        data = data[::-1] if sweep.reverse else data
        outputs = _group_outputs(composed, instance, sweep, b, data, truncation)
        outputs = outputs[::-1].copy() if sweep.reverse else outputs  # a copy: a framework takes no negative strides
        for name, rows in composed._rows(sweep, instance.params).items():
            values[name] = outputs[..., rows]
    return outputs


def _group_outputs(composed, instance, sweep, b, data, truncation):
    """A group's outputs over data (its own steps, 1, features), in its own time, truncated."""
    steps, k = len(data), truncation.value
    if not truncation.chunked and not truncation.windowed:  # full BPTT
        return _run(composed, instance, sweep, b, data, [(0, steps, False)])[0]
    if truncation.chunked:
        runs = [(a, min(a + k, steps), a > 0) for a in range(0, steps, k)]
        return np.concatenate(_run(composed, instance, sweep, b, data, runs))
    first = _run(composed, instance, sweep, b, data, [(0, min(k, steps), False)])[0]
    later = [(a, a + k + 1, True) for a in range(steps - k)]  # own step a+k+1 from the held state at step a
    last = [run[-1:] for run in _run(composed, instance, sweep, b, data, later)] if later else []
    return np.concatenate([first, *last])


def _run(composed, instance, sweep, b, data, runs):
    """The group's outputs over each run (start, stop, held) of its own steps start+1..stop, from its state at step
    start (held at the unperturbed value if held, else the initial state): runs of one length side by side."""
    found = {}
    for length in sorted({stop - start for start, stop, _ in runs}):
        same = [run for run in runs if run[1] - run[0] == length]
        xs = np.concatenate([data[start:stop] for start, stop, _ in same], axis=1)
        states = tuple(
            np.concatenate([_start(instance, name, b, start, held) for start, _, held in same])
            for name in sweep.passes.spec.states
        )
        mine = composed._params(sweep, instance.params)
        outputs = np.asarray(composed.run_forward(sweep.passes, mine, xs, states, None, {})[0])
        found.update({run: outputs[:, [n]] for n, run in enumerate(same)})
    return [found[run] for run in runs]


def _start(instance, name, b, start, held):
    """Sequence b's state `name` (an initial state's key) at its group's own step start: (1, size)."""
    if held:  # the unperturbed run's cache holds each state in its group's own steps
        return instance.frozen[name.removesuffix("0")][start, b : b + 1]
    return instance.initial[name][b : b + 1]
