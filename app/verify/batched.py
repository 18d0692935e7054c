"""Sets of initial states (and of vector parameters) one after the other along the batch, for the finite differences
of a module whose parameter sets cannot sit side by side (app/verify/sets.py: a norm's mean over the units mixes them).

An initial state is one per sample, and a batch's samples never meet: S sets of initial states run as one
instance of S times the batch (set k's samples k*B..(k+1)*B-1, each set's inputs, targets and held states the
instance's), and set k's loss is that of a plain forward pass at set k, up to rounding (a batch's sums may group
their terms otherwise). A vector parameter that the maths reads elementwise along the units (a bias, a norm's gain)
can be each sample's own as well: given a row per sample, it broadcasts as the sample's row (trusted.forward),
so S sets of vectors run in one pass too, where a norm keeps S sets of parameters from sitting side by side. Whether
the module keeps its samples (and rows) apart is not assumed: Batched.find compares two
different sets against plain forward passes, as Layout.find does, and offers nothing if they disagree."""

import dataclasses

import numpy as np

from bptt.app.verify.reverse_loss import groups_of
from bptt.app.verify.sets import AGREEMENT

SAMPLES = 96  # at most this many samples in one forward pass: beyond, a pass costs more than the calls it saves
_FOUND = {}  # (module, class of instance, truncation, input shape, state shapes) -> what Batched.find found


@dataclasses.dataclass(frozen=True)
class Batched:
    """How many sets sit one after the other along the batch, at once; the vector parameters they vary too (each
    set's vector in its samples' rows: app/verify/trusted.py), besides the initial states."""

    sets: int
    vectors: tuple = ()

    @staticmethod
    def find(instance, truncate=None):
        """Batched(SAMPLES // B sets) if two different sets give their plain losses so, varying the vector parameters
        too if they do so then, else None (a module of groups of steps, a padded batch, a batch of over SAMPLES / 2
        samples: none). Tried once for a module, class of instance, truncation and shapes."""
        batch = instance.xs.shape[1]
        if groups_of(instance.module) is not None or instance.lengths is not None or SAMPLES // batch < 2:
            return None
        shapes = tuple(value.shape for value in [*instance.initial.values(), *instance.params.values()])
        key = (instance.module, type(instance), truncate, instance.xs.shape, shapes)
        if key not in _FOUND:
            if len(_FOUND) >= 256:
                _FOUND.clear()
            _FOUND[key] = Batched._tried(instance, truncate, SAMPLES // batch)
        return _FOUND[key]

    @staticmethod
    def _tried(instance, truncate, sets):
        vectors = tuple(name for name, dims in instance.module.SHAPES.items() if len(dims) == 1)
        for varied in dict.fromkeys((vectors, ())):
            try:
                if Batched(2, varied)._agrees(instance, truncate):
                    return Batched(sets, varied)
            except (ValueError, RuntimeError, TypeError):  # the module refused a row per sample of its vectors
                continue
        return None

    def _agrees(self, instance, truncate):
        """Whether two different sets' losses, along the batch, are their plain losses."""
        rng, base = np.random.default_rng(0), self.values(instance)
        moved = {key: value * (1 + 0.01 * rng.standard_normal(value.shape)) for key, value in base.items()}
        plain = np.array([instance.loss(truncate), self.plain(instance, moved).loss(truncate)])
        wide = self.wide(instance, [base, moved]).loss(truncate)
        return np.shape(wide) == (2,) and bool(np.all(np.abs(wide - plain) <= AGREEMENT * np.abs(plain).max()))

    def values(self, instance):
        """The arrays the sets vary: the initial states, then the vectors."""
        return {**instance.initial, **{name: instance.params[name] for name in self.vectors}}

    def plain(self, instance, values):
        """The instance at one set of values."""
        params = {**instance.params, **{name: values[name] for name in self.vectors}}
        return dataclasses.replace(instance, params=params, initial={key: values[key] for key in instance.initial})

    def losses(self, instance, truncate, changes):
        """The loss at each change, a list of (name of an array of values(), index, value), each applied alone: set k
        of a chunk of self.sets takes the k-th change."""
        found, base = [], self.values(instance)
        for first in range(0, len(changes), self.sets):
            chunk = changes[first : first + self.sets]
            values = [{**base, name: _changed(base[name], index, value)} for name, index, value in chunk]
            found.extend(self.wide(instance, values).loss(truncate)[: len(chunk)])
        return found

    def wide(self, instance, values):
        """An instance of the given sets of values() (dicts), padded to self.sets sets with the last."""
        values = values + values[-1:] * (self.sets - len(values))  # one shape per instance
        together = {key: np.concatenate([value[key] for value in values]) for key in instance.initial}
        batch = instance.xs.shape[1]
        rows = {name: np.repeat([value[name] for value in values], batch, axis=0) for name in self.vectors}
        held = [key[:-1] for key in instance.module.STATES]  # what detached segments start from
        frozen = {key: np.concatenate([instance.frozen[key]] * self.sets, axis=1) for key in held}
        xs, ys = (np.concatenate([data] * self.sets, axis=1) for data in (instance.xs, instance.ys))
        return dataclasses.replace(
            instance,
            params={**instance.params, **rows},
            xs=xs,
            ys=ys,
            initial=together,
            frozen=frozen,
            sets=self.sets,
            batched=True,
        )


def _changed(array, index, value):
    """A copy of array with array[index] = value."""
    changed = array.copy()
    changed[index] = value
    return changed
