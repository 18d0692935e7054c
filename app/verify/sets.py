"""Several sets of parameters and initial states in one forward pass, for finite differences.

A generated module's loss at S parameter sets costs S forward passes, each at NumPy's per-call floor
when the arrays are small. Placed side by side, the sets run as one instance of the same module at S
times the sizes: each matrix block-diagonal (set k's block acts on set k's part of every state), each
vector and initial state the sets' vectors one after the other, the inputs repeated along their feature
axis (or shared, for a dimension only integer inputs index). An axis of stacked blocks ("4*h", the four
gates' rows of torch's W_ih) is widened block by block, so that the module's slice of a gate reads every
set's gate. Set k's outputs are then the k-th block of the outputs' last axis, and its loss that of a
plain forward pass at set k, up to rounding (the sums of a product may group their terms otherwise: an
entry the loss does not read may get a difference of rounding, not exactly 0).

Whether a module's cells keep the sets apart is not assumed: Layout.find tries the layouts on an
instance (the first of its module, truncation and shapes), through its class's loss (which must give one
loss per set of a wide instance), against plain forward passes at two different sets, and offers none if
no layout reproduces them: a cell that reduces over its units (a norm's mean) mixes the sets, and gets
none. A teacher-forced cell is not tried: its targets, fed in, would need repeating too. A nan or inf in
one set reaches the others through the blocks' zeros: a chunk of sets whose losses are not all finite is
evaluated again one set at a time."""

import dataclasses
import functools

import numpy as np

WIDTH = 64  # at most this many entries along a widened axis: beyond, the blocks' zeros cost more than calls
AGREEMENT = 1e-10  # the relative difference between a set's loss, wide and plain, that a layout may show
STACK = "*"  # the name blocks gives the axis that counts the blocks of a stacked axis ("4*h"), never widened
_FOUND = {}  # (module, class of instance, truncation, input shape, sizes) -> what Layout.find found


@dataclasses.dataclass(frozen=True)
class Layout:
    """How sets of an instance sit side by side: the dimensions they share (not widened), how many at once."""

    shared: tuple
    sets: int

    @staticmethod
    def find(instance, truncate=None):
        """The first layout under which two different sets give their plain losses, or None. Tried once
        for a module, class of instance, truncation and shapes: what it shows is the cells' structure."""
        module, sizes = instance.module, sizes_of(instance)
        if module.TEACHER_FORCED:
            return None  # targets fed in
        key = (module, type(instance), truncate, instance.xs.shape, tuple(sorted(sizes.items())))
        if key not in _FOUND:
            if len(_FOUND) >= 256:
                _FOUND.clear()
            _FOUND[key] = Layout._tried(instance, truncate, WIDTH // max(sizes.values()))
        return _FOUND[key]

    @staticmethod
    def _tried(instance, truncate, sets):
        """The first layout of this many sets under which two different sets give their plain losses, or None."""
        module = instance.module
        if sets < 2:
            return None
        base, moved = _values(instance), _jittered(instance)
        plain = np.array([instance.loss(truncate), _with(instance, moved).loss(truncate)])
        for shared in [(), *((name,) for name in module.SIZES)]:
            layout = Layout(shared, sets)
            try:
                wide = layout.widen(instance, [base, moved]).loss(truncate)
            except (ValueError, RuntimeError, TypeError):  # the module (NumPy, torch, JAX) refused the widened arrays
                continue
            if np.shape(wide) == (2,) and np.all(np.abs(wide - plain) <= AGREEMENT * np.abs(plain).max()):
                return layout
        return None

    def losses(self, instance, truncate, changes):
        """The loss at each change, a list of (array name, index, value), each applied alone: set k of a
        wide instance of the unchanged values takes the k-th change of a chunk, at its place in block k."""
        return self.losses_of(instance, truncate)(changes)

    def losses_of(self, instance, truncate):
        """losses(instance, truncate, changes) as a function of the changes: the wide instance of the unchanged
        values built once, for every round of a check's ladders (held states only if truncate detaches some); a
        chunk's changes are set in its arrays (copies of its own) for its pass, then set back to the unchanged."""
        base = _values(instance)
        unchanged = self.widen(instance, [base] * self.sets, self.data(instance, held=truncate is not None))
        wide_values = {name: np.array(value, order="C") for name, value in _values(unchanged).items()}
        unchanged, flat = _with(unchanged, wide_values), {name: array.ravel() for name, array in wide_values.items()}
        dims, places = self.dims(instance.module), {}

        def place(name, index):
            """The entry's flat array, its offsets in every block of it (each axis's place is k * block apart), and
            its unchanged value."""
            if (name, index) not in places:
                ends = [self.place(dims[name], base[name].shape, index, k) for k in (0, self.sets - 1)]
                steps = [stride // flat[name].itemsize for stride in wide_values[name].strides]  # C order
                first, last = (sum([i * step for i, step in zip(end, steps, strict=True)]) for end in ends)
                offsets = range(first, last + 1, (last - first) // (self.sets - 1))
                places[name, index] = flat[name], offsets, float(base[name][index])
            return places[name, index]

        def losses(changes):
            found = []
            for first in range(0, len(changes), self.sets):
                chunk = changes[first : first + self.sets]
                chunk += chunk[-1:] * (self.sets - len(chunk))  # always self.sets wide: one shape per instance
                at = [(place(name, index), k, value) for k, (name, index, value) in enumerate(chunk)]
                try:
                    for (array, offsets, _), k, value in at:
                        array[offsets[k]] = value
                    found_here = unchanged.loss(truncate)
                finally:
                    for (array, offsets, saved), k, _ in at:
                        array[offsets[k]] = saved
                if not np.isfinite(found_here).all():  # evaluated again, one set at a time
                    found_here = [_with(instance, _changed(base, *change)).loss(truncate) for change in chunk]
                found.extend(found_here[: len(changes) - first])
            return found

        return losses

    def place(self, dims, shape, index, k):
        """Where entry index of an array of this shape (axes named by dims) is in block k of its wide array: an
        axis of stacked blocks ("4*h") holds, in each of its blocks, every set's block side by side."""
        place, kept = [], self.kept
        for i, dim, n in zip(index, dims, shape, strict=True):
            count, size = stacked(dim)
            block = n // count
            place.append(
                i if size in kept or literal(size) else (i // block) * self.sets * block + k * block + i % block
            )
        return tuple(place)

    @property
    def kept(self):
        """The axes not widened: time, batch and the shared dimensions."""
        return {"T", "T+1", "B", *self.shared}

    @staticmethod
    def dims(module):
        """The names of the axes of each parameter and initial state."""
        return {**module.SHAPES, **{key: ("B", size) for key, size in module.STATES.items()}}

    def data(self, instance, count=None, held=True):
        """(inputs, targets, held states) of a wide instance of count sets (default self.sets): inputs and
        held states repeated along their widened axes, each target once for each set (sample b's for set
        k at b * count + k, so that the outputs' blocks are read as samples); no held states (None) unless held:
        only a truncated loss's detached segments start from them."""
        module, count, kept = instance.module, count or self.sets, self.kept
        inputs = next(iter(module.CACHE.values()))  # the cache's first array is the inputs
        xs = blocks([instance.xs] * count, inputs, kept) if instance.xs.ndim > 2 else instance.xs
        states = {key[:-1]: ("T+1", "B", size) for key, size in module.STATES.items()}
        frozen = {key: blocks([instance.frozen[key]] * count, states[key], kept) for key in states} if held else None
        return xs, np.repeat(instance.ys, count, axis=1), frozen

    def widen(self, instance, values, data=None):
        """An instance holding the given sets (dicts of parameters and initial states) side by side;
        data: what self.data(instance, len(values)) returns, if at hand."""
        module, count = instance.module, len(values)
        xs, ys, frozen = data or self.data(instance, count)
        dims = self.dims(module)
        wide = {key: blocks([value[key] for value in values], dims[key], self.kept) for key in values[0]}
        params, initial = {key: wide[key] for key in module.PARAMS}, {key: wide[key] for key in instance.initial}
        return dataclasses.replace(instance, params=params, xs=xs, ys=ys, initial=initial, frozen=frozen, sets=count)


@functools.cache
def stacked(dim):
    """(count, size) of an axis: (4, "h") for "4*h", an axis of 4 stacked blocks of h (a 4h pre-activation whose
    slices are the gates), (1, "h") for "h"."""
    count, _, size = dim.rpartition("*")
    return int(count or 1), size


def literal(dim):
    """Whether an axis has a number for its size ("1": a model's one-unit value), not a size of the model: the module
    allocates it so, and it is never widened."""
    return dim.isdigit()


def blocks(arrays, dims, shared):
    """The arrays (of one shape, axes named by dims) side by side: along every axis not in shared (nor literal),
    array k fills the k-th block and zeros the rest (a block-diagonal matrix, if two axes). An axis of
    stacked blocks ("4*h") is widened block by block: block j of the wide stack holds every set's block j side
    by side, so that a slice of the stack (a gate) reads every set's gate."""
    shared = {*shared, *filter(literal, dims)}
    split = [stacked(dim) for dim in dims]
    if all(count == 1 for count, _ in split):
        return _side_by_side(arrays, dims, shared)
    shape, inner, names = arrays[0].shape, [], []
    for (count, size), n in zip(split, shape, strict=True):  # an axis of 4 blocks of h: two axes, 4 (kept) and h
        inner += [count, n // count] if count > 1 else [n]
        names += [STACK, size] if count > 1 else [size]
    wide = _side_by_side([array.reshape(inner) for array in arrays], names, {*shared, STACK})
    return wide.reshape([n if size in shared else n * len(arrays) for (_, size), n in zip(split, shape, strict=True)])


def _side_by_side(arrays, dims, shared):
    """blocks of arrays whose axes are not stacked."""
    wide = [axis for axis, dim in enumerate(dims) if dim not in shared]
    if len(wide) < 2:  # one after the other, or (every axis shared) the one array
        return np.concatenate(arrays, axis=wide[0]) if wide else arrays[0]
    count, shape = len(arrays), arrays[0].shape
    out = np.zeros([m for axis, n in enumerate(shape) for m in ((count, n) if axis in wide else (n,))], arrays[0].dtype)
    diagonal = np.arange(count)  # the same block index along every widened axis
    index = tuple(
        i for axis in range(len(shape)) for i in ((diagonal, slice(None)) if axis in wide else (slice(None),))
    )
    out[index] = np.stack(arrays)  # indices apart from each other: the blocks' axis comes first
    return out.reshape([count * n if axis in wide else n for axis, n in enumerate(shape)])


def sizes_of(instance):
    """The sizes of the instance's dimensions, read from its parameters' shapes."""
    sizes = {}
    for key, dims in instance.module.SHAPES.items():
        sizes.update(zip(dims, instance.params[key].shape, strict=True))
    return sizes


def _values(instance):
    """The instance's parameters and initial states, one dict."""
    return {**instance.params, **instance.initial}


def _with(instance, values):
    """instance with other parameters and initial states (a dict of both)."""
    params = {key: values[key] for key in instance.params}
    return dataclasses.replace(instance, params=params, initial={key: values[key] for key in instance.initial})


def _changed(values, name, index, value):
    """values with values[name][index] = value (in a copy of that array)."""
    changed = {**values, name: values[name].copy()}
    changed[name][index] = value
    return changed


def _jittered(instance):
    """The instance's values, each entry moved by about 1% of itself (a second set, unlike the first)."""
    rng = np.random.default_rng(0)
    return {key: value * (1 + 0.01 * rng.standard_normal(value.shape)) for key, value in _values(instance).items()}
