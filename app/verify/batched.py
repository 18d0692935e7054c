"""Sets of initial states (and of vector and matrix parameters) one after the other along the batch, for the finite
differences of a module whose parameter sets cannot sit side by side (app/verify/sets.py: a norm's mean over the
units mixes them).

An initial state is one per sample, and a batch's samples never meet: S sets of initial states run as one
instance of S times the batch (set k's samples k*B..(k+1)*B-1, each set's inputs, targets and held states the
instance's), and set k's loss is that of a plain forward pass at set k, up to rounding (a batch's sums may group
their terms otherwise). A vector parameter that the maths reads elementwise along the units (a bias, a norm's gain)
can be each sample's own as well: given a row per sample, it broadcasts as the sample's row (trusted.forward),
so S sets of vectors run in one pass too, where a norm keeps S sets of parameters from sitting side by side. So can a
matrix that the maths multiply by np.matmul (lstm-layernorm's W_h): given one per sample, each sample's product is one
of a stack's (trusted.forward), which rounds otherwise than the plain product.
In a layout of its own (fewer sets at once: the widened inputs grow as the sets squared), a dimension no state has
(but a teacher-forced one, its targets fed in then set k's at block k, its states' too) and no norm reduces over (the
inputs' d, the outputs' q) is widened, as sets.py widens every one: the parameters
with such an axis hold the sets' blocks side by side (W_x's columns, V's rows), set k's samples read their inputs at
block k of the inputs' axis (a label, shifted to it) and their outputs at block k of the outputs', so set k's
samples run with set k's matrices. Whether the module keeps its samples
(and rows, and blocks) apart is not assumed: Batched.find compares two different sets against plain forward
passes, as Layout.find does, and offers nothing if they disagree."""

import dataclasses

import numpy as np

from bptt.app.verify.reverse_loss import groups_of
from bptt.app.verify.sets import AGREEMENT, blocks, sizes_of, stacked

SAMPLES = 96  # at most this many samples in one forward pass: beyond, a pass costs more than the calls it saves
ROWS = 192  # at most this many rows along a widened axis
INPUTS = 2**18  # at most this many entries in the widened inputs (set k's samples' at block k, zeros elsewhere)
_FOUND = {}  # (module, class of instance, truncation, input shape, state shapes) -> what Batched.find found


@dataclasses.dataclass(frozen=True)
class Batched:
    """How many sets sit one after the other along the batch, at once; the vector parameters they vary too (each
    set's vector in its samples' rows: app/verify/trusted.py), besides the initial states; or, with dimensions
    widened, the parameters with such an axis only (each set's block read by its own samples)."""

    sets: int
    vectors: tuple = ()
    widened: tuple = ()
    matrices: tuple = ()  # matrices given one per sample instead (trusted.py), which sets vary

    @staticmethod
    def find(instance, truncate=None):
        """The layouts of sets along the batch, each varying its own arrays (varies): SAMPLES // B sets of the initial
        states, and of the vectors if their rows keep apart; then, if that one holds, sets of the matrices of the
        widest widened dimensions that keep them apart (fewer at once: the inputs grow as the sets squared), and sets
        of the other matrices, given one per sample, if the maths take them. Each is
        offered if two different sets give their plain losses so; none (an empty tuple) for a module of groups of
        steps, a padded batch, a batch of over SAMPLES / 2 samples. Tried once for a module, class of instance,
        truncation and shapes."""
        batch = instance.xs.shape[1]
        if groups_of(instance.module) is not None or instance.lengths is not None or SAMPLES // batch < 2:
            return ()
        shapes = tuple(value.shape for value in [*instance.initial.values(), *instance.params.values()])
        key = (instance.module, type(instance), truncate, instance.xs.shape, shapes)
        if key not in _FOUND:
            if len(_FOUND) >= 256:
                _FOUND.clear()
            _FOUND[key] = Batched._tried(instance, truncate, SAMPLES // batch)
        return _FOUND[key]

    @staticmethod
    def _tried(instance, truncate, most):
        module = instance.module
        vectors = tuple(name for name, dims in module.SHAPES.items() if len(dims) == 1)
        states = _first(instance, truncate, [Batched(most, varied) for varied in dict.fromkeys((vectors, ()))])
        if states is None:
            return ()
        widened = [Batched(_widened_sets(instance, most, dims), (), dims) for dims in _widenings(module)]
        blocked = _first(instance, truncate, [each for each in widened if each.sets >= 2 and each.blocked(module)])
        found = (states,) if blocked is None else (states, blocked)
        covered = {name for layout in found for name in layout.varies(instance)}
        rest = tuple(name for name, dims in module.SHAPES.items() if len(dims) == 2 and name not in covered)
        stacked = _first(instance, truncate, [Batched(most, matrices=rest)] if rest else [])
        return found if stacked is None else (*found, stacked)

    def _agrees(self, instance, truncate):
        """Whether two different sets' losses, along the batch, are their plain losses."""
        rng, base = np.random.default_rng(0), self.values(instance)
        moved = {key: value * (1 + 0.01 * rng.standard_normal(value.shape)) for key, value in base.items()}
        plain = np.array([instance.loss(truncate), self.plain(instance, moved).loss(truncate)])
        wide = self.wide(instance, [base, moved]).loss(truncate)
        return np.shape(wide) == (2,) and bool(np.all(np.abs(wide - plain) <= AGREEMENT * np.abs(plain).max()))

    def varies(self, instance):
        """The arrays whose entries this layout's sets differ in: the matrices given one per sample, or the blocked
        parameters if widened, else the initial states and the vectors."""
        if self.matrices:
            return list(self.matrices)
        return self.blocked(instance.module) if self.widened else [*instance.initial, *self.vectors]

    def blocked(self, module):
        """The parameters with a widened axis: each set's block side by side."""
        return [name for name, dims in module.SHAPES.items() if {stacked(dim)[1] for dim in dims} & {*self.widened}]

    def values(self, instance):
        """The arrays the sets vary: the initial states, then the vectors and the blocked parameters."""
        varied = {*self.vectors, *self.matrices, *self.blocked(instance.module)}
        return {**instance.initial, **{name: instance.params[name] for name in instance.params if name in varied}}

    def plain(self, instance, values):
        """The instance at one set of values."""
        params = {**instance.params, **{name: values[name] for name in values if name in instance.params}}
        return dataclasses.replace(instance, params=params, initial={key: values[key] for key in instance.initial})

    def losses(self, instance, truncate, changes):
        """The loss at each change, a list of (name of an array of values(), index, value), each applied alone: set k
        of a chunk of self.sets takes the k-th change."""
        return self.losses_of(instance, truncate)(changes)

    def losses_of(self, instance, truncate):
        """losses(instance, truncate, changes) as a function of the changes: the sets' data built once, for every
        round of a check's ladders (held states only if truncate detaches some), and the wide arrays of the unchanged
        values: a chunk builds those of the arrays it changes only."""
        base, data = self.values(instance), self.data(instance, self.sets, held=truncate is not None)
        unchanged = self.wide(instance, [base], data)

        def losses(changes):
            found = []
            for first in range(0, len(changes), self.sets):
                chunk = changes[first : first + self.sets]
                values = [{**base, name: _changed(base[name], index, value)} for name, index, value in chunk]
                wide = self.wide(instance, values, data, (unchanged, {name for name, _, _ in chunk}))
                found.extend(wide.loss(truncate)[: len(chunk)])
            return found

        return losses

    def data(self, instance, count, held=True):
        """(inputs, targets, held states) of count sets along the batch: set k's samples' inputs at block k of
        a widened inputs' axis (a label shifted to it), each set's targets and held states the instance's; no held
        states (None) unless held: only a truncated loss's detached segments start from them."""
        module, xs = instance.module, instance.xs
        inputs = _rows(module, "xs")
        if inputs in self.widened and xs.ndim == 2:  # labels: set k's read its block of the columns
            size = sizes_of(instance)[inputs]
            xs = np.concatenate([xs + k * size for k in range(count)], axis=1)
        elif inputs in self.widened:
            xs = blocks([xs] * count, ("T", "B", inputs), {"T"})
        else:
            xs = np.concatenate([xs] * count, axis=1)
        frozen = None
        if held:  # what detached segments start from
            frozen = {
                key[:-1]: self.states([instance.frozen[key[:-1]]] * count, size) for key, size in module.STATES.items()
            }
        return xs, np.concatenate([instance.ys] * count, axis=1), frozen, self.fed(instance, count)

    def fed(self, instance, count):
        """The targets a teacher-forced forward pass of count sets reads, if their rows are widened (set k's shifted
        to its block), else None (ys)."""
        module, ys = instance.module, instance.ys
        rows = _rows(module, "ys")
        if not module.TEACHER_FORCED or rows not in self.widened:
            return None
        if ys.ndim == 2:  # labels
            size = sizes_of(instance)[rows]
            return np.concatenate([ys + k * size for k in range(count)], axis=1)
        return blocks([ys] * count, ("T", "B", rows), {"T"})

    def states(self, arrays, size):
        """Sets' values of a state (..., B, size) one after the other along the batch; each set's block of a widened
        dimension (a teacher-forced state's) on its own samples' rows, zeros elsewhere."""
        if size not in self.widened:
            return np.concatenate(arrays, axis=-2)
        dims = (*("T+1",) * (arrays[0].ndim - 2), "B", size)
        return blocks(arrays, dims, {"T+1"})

    def wide(self, instance, values, data=None, like=None):
        """An instance of the given sets of values() (dicts), padded to self.sets sets with the last; data: what
        self.data(instance, self.sets) returns, if at hand; like: (a wide instance, names): its arrays but for the
        named ones (the values of the others its own)."""
        values = values + values[-1:] * (self.sets - len(values))  # one shape per instance
        module, batch = instance.module, instance.xs.shape[1]
        xs, ys, frozen, fed = data or self.data(instance, self.sets)
        built = set(values[0]) if like is None else like[1]
        together = {
            key: self.states([value[key] for value in values], module.STATES[key])
            for key in instance.initial
            if key in built
        }
        every_blocked = self.blocked(module)
        blocked = [name for name in every_blocked if name in built]
        kept = {"T", "T+1", "B", *module.SIZES} - {*self.widened}
        params = {name: blocks([value[name] for value in values], module.SHAPES[name], kept) for name in blocked}
        rowed = [name for name in self.vectors if name not in every_blocked and name in built]
        params |= {name: np.repeat([value[name] for value in values], batch, axis=0) for name in rowed}
        matrices = [name for name in self.matrices if name in built]
        stacked = (np.repeat([value[name] for value in values], batch, axis=0) for name in matrices)
        params |= {name: np.moveaxis(stack, 0, -1) for name, stack in zip(matrices, stacked, strict=True)}
        wide = instance if like is None else like[0]
        return dataclasses.replace(
            instance,
            params={**wide.params, **params},
            xs=xs,
            ys=ys,
            initial={**(wide.initial if like else {}), **together},
            frozen=frozen,
            sets=self.sets,
            batched=True,
            own_blocks=_rows(module, "outputs") in self.widened,
            fed=fed,
        )


def _first(instance, truncate, candidates):
    """The first of the candidates (Batched) under which two different sets give their plain losses, or None."""
    for candidate in candidates:
        try:
            if dataclasses.replace(candidate, sets=2)._agrees(instance, truncate):
                return candidate
        except (ValueError, RuntimeError, TypeError):  # the module refused a row per sample, or the widened arrays
            continue
    return None


def _widenings(module):
    """The dimensions to try widening, most first: every one no state has (but a teacher-forced one, whose values are
    the targets) and that the inputs or outputs run along, then each of them alone."""
    held = {size for key, size in module.STATES.items() if key[:-1] not in module.TEACHER_FORCED}
    free = [dim for dim in module.SIZES if dim not in held and dim in _rows(module)]
    return list(dict.fromkeys([tuple(free), *((dim,) for dim in free)])) if free else []


def _widened_sets(instance, most, widened):
    """How many sets at once, at most `most`, widening these dimensions: at most ROWS rows along each, INPUTS entries
    of the inputs."""
    sizes = sizes_of(instance)
    sets = min([most, *(ROWS // sizes[dim] for dim in widened)])
    if _rows(instance.module, "xs") in widened and instance.xs.ndim > 2:  # the inputs grow as the sets squared
        sets = min(sets, int(np.sqrt(INPUTS / instance.xs.size)))
    return sets


def _rows(module, data=None):
    """The dimension of a step's rows of the module's data ("xs" or "outputs"; both's, a list, if data is None)."""
    rows = getattr(module, "_DATA", {})
    return [rows[key] for key in ("xs", "outputs") if key in rows] if data is None else rows.get(data)


def _changed(array, index, value):
    """A copy of array with array[index] = value."""
    changed = array.copy()
    changed[index] = value
    return changed
