"""Sets of initial states one after the other along the batch, for the finite differences of a module whose
parameter sets cannot sit side by side (app/verify/sets.py: a norm's mean over the units mixes them).

An initial state is one per sample, and a batch's samples never meet: S sets of initial states run as one
instance of S times the batch (set k's samples k*B..(k+1)*B-1, each set's inputs, targets and held states the
instance's), and set k's loss is that of a plain forward pass at set k, up to rounding (a batch's sums may group
their terms otherwise). Whether the module keeps its samples apart is not assumed: Batched.find compares two
different sets against plain forward passes, as Layout.find does, and offers nothing if they disagree."""

import dataclasses

import numpy as np

from bptt.app.verify.reverse_loss import groups_of
from bptt.app.verify.sets import AGREEMENT

SAMPLES = 96  # at most this many samples in one forward pass: beyond, a pass costs more than the calls it saves
_FOUND = {}  # (module, class of instance, truncation, input shape, state shapes) -> what Batched.find found


@dataclasses.dataclass(frozen=True)
class Batched:
    """How many sets of initial states sit one after the other along the batch, at once."""

    sets: int

    @staticmethod
    def find(instance, truncate=None):
        """Batched(SAMPLES // B sets) if two different sets give their plain losses so, else None (a module of groups
        of steps, a padded batch, a batch of over SAMPLES / 2 samples: none). Tried once for a module, class of
        instance, truncation and shapes."""
        batch = instance.xs.shape[1]
        if groups_of(instance.module) is not None or instance.lengths is not None or SAMPLES // batch < 2:
            return None
        shapes = tuple(value.shape for value in instance.initial.values())
        key = (instance.module, type(instance), truncate, instance.xs.shape, shapes)
        if key not in _FOUND:
            if len(_FOUND) >= 256:
                _FOUND.clear()
            _FOUND[key] = Batched._tried(instance, truncate, SAMPLES // batch)
        return _FOUND[key]

    @staticmethod
    def _tried(instance, truncate, sets):
        rng = np.random.default_rng(0)
        moved = {key: value * (1 + 0.01 * rng.standard_normal(value.shape)) for key, value in instance.initial.items()}
        plain = np.array([instance.loss(truncate), dataclasses.replace(instance, initial=moved).loss(truncate)])
        wide = Batched(2).wide(instance, [instance.initial, moved]).loss(truncate)
        agree = np.shape(wide) == (2,) and np.all(np.abs(wide - plain) <= AGREEMENT * np.abs(plain).max())
        return Batched(sets) if agree else None

    def losses(self, instance, truncate, changes):
        """The loss at each change, a list of (initial state's name, index, value), each applied alone: set k of a
        chunk of self.sets takes the k-th change."""
        found = []
        for first in range(0, len(changes), self.sets):
            chunk = changes[first : first + self.sets]
            values = [
                {**instance.initial, name: _changed(instance.initial[name], index, value)}
                for name, index, value in chunk
            ]
            found.extend(self.wide(instance, values).loss(truncate)[: len(chunk)])
        return found

    def wide(self, instance, values):
        """An instance of the given sets of initial states (dicts), padded to self.sets sets with the last."""
        values = values + values[-1:] * (self.sets - len(values))  # one shape per instance
        together = {key: np.concatenate([value[key] for value in values]) for key in instance.initial}
        held = [key[:-1] for key in instance.module.STATES]  # what detached segments start from
        frozen = {key: np.concatenate([instance.frozen[key]] * self.sets, axis=1) for key in held}
        xs, ys = (np.concatenate([data] * self.sets, axis=1) for data in (instance.xs, instance.ys))
        return dataclasses.replace(
            instance, xs=xs, ys=ys, initial=together, frozen=frozen, sets=self.sets, batched=True
        )


def _changed(array, index, value):
    """A copy of array with array[index] = value."""
    changed = array.copy()
    changed[index] = value
    return changed
