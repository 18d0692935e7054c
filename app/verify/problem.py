"""A random instance of a generated module and the losses its backward passes differentiate: full
BPTT's, a window's or a chunk's (the detached states held at an unperturbed run's values).

A wide instance (sets > 1) holds several sets of parameters and initial states side by side
(app/verify/sets.py): its losses are one per set, from one forward pass."""

from dataclasses import dataclass

import numpy as np

from bptt.app.verify import trusted
from bptt.app.verify.overflow import NonFiniteForward
from bptt.app.verify.reverse_loss import groups_of, truncated_losses
from bptt.runtime.options import Truncation


def default_sizes(module):
    """Distinct small sizes (3, 4, 5, ...) so that a transposed shape cannot pass."""
    return {name: 3 + i for i, name in enumerate(module.SIZES)}


def problem(module, steps, batch, seed, sizes=None, lengths=None):
    """A random instance: float64 parameters, inputs, targets and initial states; lengths (a Lengths, or None):
    a right-padded batch's, given or drawn from 1..T (then after everything else, so the arrays stay those of
    the same seed without lengths)."""
    rng = np.random.default_rng(seed)
    sizes = sizes or default_sizes(module)
    params = module.init_params(rng, np.float64, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, np.float64, **sizes)
    initial = {name: 0.5 * rng.standard_normal((batch, sizes[size])) for name, size in module.STATES.items()}
    if lengths is not None:
        lengths = np.asarray(lengths.draw(rng, steps, batch))
    return Problem(module, params, xs, ys, initial, lengths=lengths).freeze()


@dataclass
class Problem:
    """A generated module with one set of arrays, and the losses that its
    full and truncated backward passes differentiate."""

    module: object
    params: dict
    xs: np.ndarray
    ys: np.ndarray
    initial: dict
    frozen: dict = None
    sets: int = 1  # sets of parameters side by side (app/verify/sets.py): each loss is an array of one per set
    batched: bool = False  # the sets one after the other along the batch instead (app/verify/batched.py)
    own_blocks: bool = False  # a batched one's outputs: every set's block side by side, its samples read theirs
    unperturbed: tuple = None  # (outputs, cache) of freeze's run, which require_finite reads
    lengths: np.ndarray | None = None  # a right-padded batch's (lengths=): its padded steps' losses weigh nothing
    fed: np.ndarray | None = None  # the targets a teacher-forced forward pass reads, if not ys (batched.py's, shifted)

    def forward(self, params, start, stop, initial, cache=False):
        """Outputs (or the cache) of the generated forward pass over steps start+1..stop."""
        return self.run(params, start, stop, initial)[1 if cache else 0]

    def run(self, params, start, stop, initial):
        """The generated forward pass over steps start+1..stop: (outputs, cache); over all steps with the lengths
        (a reverse-time state starts at each sequence's own last step, not on its padding)."""
        return self.module.forward(params, *self.data(start, stop), **initial, **self.padded(start, stop))

    def data(self, start, stop):
        """The forward pass's data over steps start+1..stop: xs, and ys if teacher-forced."""
        return (self.xs[start:stop], self.forced[start:stop]) if self.module.TEACHER_FORCED else (self.xs[start:stop],)

    @property
    def forced(self):
        """The targets a teacher-forced forward pass reads: fed, or ys."""
        return self.ys if self.fed is None else self.fed

    def padded(self, start, stop):
        """The forward pass's lengths keyword over steps start+1..stop: the lengths over all steps, if any."""
        return {"lengths": self.lengths} if self.lengths is not None and (start, stop) == (0, len(self.xs)) else {}

    def outputs(self, start, stop, initial):
        """The outputs of the forward pass over steps start+1..stop from the states initial, not kept: those of
        trusted.forward (valid until its next call), or with the lengths of the module's forward."""
        if self.padded(start, stop):
            return self.forward(self.params, start, stop, initial)
        return trusted.forward(self.module, self.params, self.data(start, stop), initial, cache=False)[0]

    def start(self, start, detached):
        """The states a segment from step `start` starts from. A detached segment starts from the
        state of an unperturbed full run at `start`, held constant; otherwise from the (perturbable)
        initial states. Teacher-forced states are data, like inputs: never detached."""
        state = dict(self.initial)
        if detached:
            for key in self.module.STATES:
                if key[:-1] not in self.module.TEACHER_FORCED or start > 0:
                    state[key] = self.frozen[key[:-1]][start]
        return state

    def segment(self, start, stop, detached):
        """Batch-averaged losses of steps start+1..stop, from the states start(start, detached), shape (steps, sets)."""
        outputs = self.outputs(start, stop, self.start(start, detached))
        return np.add.reduce(self.scores(outputs, self.ys[start:stop]) * self.weights(start, stop), 1) / self.batch

    @property
    def batch(self):
        """B, the samples of one set."""
        return len(self.xs[0]) // self.sets if self.batched else len(self.xs[0])

    def weights(self, start, stop):
        """The weight of each loss of steps start+1..stop in L: 1/T for a mean (a sequence's own length with
        lengths), else 1; 0 at padded steps. Shape (stop - start, B, 1), or a number without lengths."""
        if self.lengths is None:
            return 1 / len(self.xs) if self.module.MEAN else 1
        own = np.arange(start, stop)[:, None] < self.lengths
        return (own / (self.lengths if self.module.MEAN else 1))[..., None]

    def scores(self, outputs, ys):
        """The loss of every step, sample and set, shape (T, B, sets). A wide instance's outputs hold its
        sets side by side along their last axis, and its targets each sample's once for each set; a batched
        one's, set k's samples k*B..(k+1)*B-1 (of each segment side by side: app/verify/batched.py), block k of
        the outputs' last axis if own_blocks."""
        steps, batch, width = outputs.shape
        if self.own_blocks:  # (step, segment, set, sample, set's block, row): each set's samples' own block
            blocks = outputs.reshape(steps, -1, self.sets, self.batch, self.sets, width // self.sets)
            own = np.arange(self.sets)
            outputs = np.moveaxis(blocks[:, :, own, :, own], 0, 2).reshape(steps, batch, width // self.sets)
        if self.batched:
            losses = self.module.losses(outputs, ys).reshape(steps, -1, self.sets, self.batch)
            return losses.swapaxes(2, 3).reshape(steps, -1, self.sets)
        samples = outputs.reshape(steps, batch * self.sets, width // self.sets)
        return self.module.losses(samples, ys).reshape(steps, batch, self.sets)

    def segments(self, starts, length, detached):
        """segment(a, a + length, d) for each a in starts and d in detached, shape (length, starts, sets),
        from one forward pass over the segments side by side in its batch (a batch's samples never meet)."""
        if len(starts) == 1:
            return self.segment(starts[0], starts[0] + length, detached[0])[:, None]
        module, batch = self.module, self.batch
        xs, ys, fed = (
            np.concatenate([data[a : a + length] for a in starts], axis=1) for data in (self.xs, self.ys, self.forced)
        )
        states = [self.start(a, d) for a, d in zip(starts, detached, strict=True)]
        initial = {key: np.concatenate([state[key] for state in states]) for key in self.initial}
        params = trusted.tiled(module, self.params, len(starts))  # a row per sample: for each segment
        outputs = trusted.forward(module, params, (xs, fed) if module.TEACHER_FORCED else (xs,), initial, False)[0]
        weights = np.concatenate([np.broadcast_to(self.weights(a, a + length), (length, batch, 1)) for a in starts], 1)
        losses = (self.scores(outputs, ys) * weights).reshape(length, len(starts), batch, self.sets)
        return np.add.reduce(losses, 2) / batch

    def freeze(self):
        """Keep the states of a full run, before any perturbation, for detached segments."""
        self.unperturbed = self.run(self.params, 0, len(self.xs), self.initial)
        self.frozen = self.unperturbed[1]
        return self

    def loss(self, truncate=None):
        """The loss whose exact gradient backward(..., truncate) computes (an array of one per set if
        sets > 1); segments of equal length run side by side in one forward pass."""
        total = self.losses(truncate)
        return total if self.sets > 1 else total[0]

    def losses(self, truncate):
        """loss(truncate) of each set, shape (sets,)."""
        steps = len(self.xs)
        if truncate is None:
            return self.segment(0, steps, False).sum(0)
        truncation = Truncation.of(truncate)
        if groups_of(self.module) is not None:  # reverse-time states: each recursion truncated in its own time
            return truncated_losses(self, truncate)
        k = truncation.value
        if truncation.chunked:  # the state entering each chunk is detached
            full = range(0, steps - k + 1, k)  # the chunks of k steps; a shorter one may end the sequence
            rest = self.segment(len(full) * k, steps, len(full) > 0).sum(0) if steps % k else 0.0
            return self.segments(full, k, [a > 0 for a in full]).sum((0, 1)) + rest if full else rest
        if truncation.windowed:  # output j sees the state at j-k-1 (if any) as a constant
            whole = self.segment(0, min(k, steps), False).sum(0)  # outputs 1..k see every state before them
            later = range(steps - k)  # output a+k+1 of a run from the state at a, for a = 0..T-k-1
            return whole + (self.segments(later, k + 1, [True] * len(later))[-1].sum(0) if later else 0.0)
        raise ValueError(f"no deterministic loss for truncate={truncate!r}")

    def cast(self, dtype):
        """params, xs, ys and initial states in dtype (integer labels stay integers)."""
        low = np.dtype(dtype)
        params = {k: v.astype(low) for k, v in self.params.items()}
        xs, ys = (a.astype(low) if np.issubdtype(a.dtype, np.floating) else a for a in (self.xs, self.ys))
        return params, xs, ys, {k: v.astype(low) for k, v in self.initial.items()}

    def grads(self, dtype="float64", truncate=None, rng=None):
        params, xs, ys, initial = self.cast(dtype)
        padded = {} if self.lengths is None else {"lengths": self.lengths}
        return self.module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng, **padded)[1]

    def require_finite(self, dtype):
        """Raise NonFiniteForward naming the first array and step at which the forward pass in dtype overflows."""
        same = all(value.dtype == np.dtype(dtype) for value in [*self.params.values(), *self.initial.values()])
        if same and self.lengths is None and self.unperturbed is not None:
            low, (outputs, cache) = self, self.unperturbed  # freeze's forward pass of the same numbers
        else:
            low = Problem(self.module, *self.cast(dtype))
            outputs, cache = low.run(low.params, 0, len(low.xs), low.initial)
        first = _first_nonfinite({**cache, "outputs": outputs}, len(low.xs))
        if first is None:
            first = _first_nonfinite({"the loss": self.module.losses(outputs, low.ys)}, len(low.xs))
        if first is None:
            return
        low_precision = " or float64" if np.dtype(dtype) != np.float64 else ""
        zero = _first_zero_deviation(cache, len(low.xs), first[1])
        if zero is not None:
            remedy = "a positive eps keeps it finite" + (", and so may float64" if self._apart(dtype) else "")
            raise NonFiniteForward(
                f"the forward pass in {dtype} divides by zero: {zero[0]} is 0 at step t={zero[1]} of T={len(low.xs)} "
                f"(a norm's deviation, of a vector whose units are equal, with eps = 0), and {first[0]} is not "
                f"finite from step t={first[1]} (nothing to differentiate; {remedy})"
            )
        raise NonFiniteForward(
            f"the forward pass in {dtype} overflows: {first[0]} is not finite from step t={first[1]} of "
            f"T={len(low.xs)} (nothing to differentiate; fewer steps{low_precision} may stay finite)"
        )

    def _apart(self, dtype):
        """Whether float64 tells apart the units that dtype (a narrower one) found equal: its forward pass divides by
        no zero deviation."""
        if np.dtype(dtype) == np.float64:
            return False
        wide = Problem(self.module, *self.cast(np.float64))
        outputs, cache = wide.run(wide.params, 0, len(wide.xs), wide.initial)
        return _first_zero_deviation(cache, len(wide.xs), len(wide.xs)) is None


def _first_zero_deviation(cache, steps, before):
    """(name, t) of the earliest step t <= before at which a cached value one unit wide (a norm's deviation sigma,
    which the step divides by) is exactly 0, or None."""
    found = None
    for name, values in cache.items():
        if values.dtype.kind != "f" or values.ndim != 3 or values.shape[-1] != 1:
            continue
        zero = (values.reshape(len(values), -1) == 0).any(axis=1)
        zero[: len(values) - steps] = False  # a state's initial value is given, not computed
        step = int(np.argmax(zero)) + steps + 1 - len(values)
        if zero.any() and step <= before and (found is None or step < found[1]):
            found = (name, step)
    return found


def _first_nonfinite(arrays, steps):
    """(name, t) of the earliest step t at which one of the named time-major arrays holds a
    nan or inf, or None; an array of steps + 1 rows starts at step 0, of steps rows at step 1."""
    first = None
    for name, values in arrays.items():
        if values.dtype.kind != "f":
            continue
        bad = ~np.isfinite(values.reshape(len(values), -1)).all(axis=1)
        step = int(np.argmax(bad)) + steps + 1 - len(values)
        if bad.any() and (first is None or step < first[1]):
            first = (name, step)
    return first
