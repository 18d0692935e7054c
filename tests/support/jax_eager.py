"""A generated JAX module run eagerly, operation by operation, as jax.disable_jit() would, but with
each operation dispatched as JAX does outside jit (about a tenth of disable_jit's cost per
operation): its jitted functions called as the Python functions they wrap, its scans as Python loops
(jax.lax.scan's own loop under disable_jit). For many small modules, each of which compiled whole
would take seconds."""

import contextlib
import dataclasses
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.array import ArrayImpl


def python_scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """jax.lax.scan as the loop it is under jax.disable_jit()."""
    leaves, tree = jax.tree.flatten(xs)
    steps = length if length is not None else leaves[0].shape[0]
    rows = [list(leaf) for leaf in leaves]  # each leaf's steps, unstacked at once (an indexing each costs ten times)
    carry, ys = init, []
    for t in reversed(range(steps)) if reverse else range(steps):
        carry, y = f(carry, jax.tree.unflatten(tree, [row[t] for row in rows]))
        ys.append(y)
    if reverse:
        ys.reverse()
    return carry, jax.tree.map(lambda *steps: jnp.stack(steps), *ys)


def on_device(array):
    """A NumPy array as a JAX array, put on the device as it is (its dtype, strongly typed): jnp.asarray of a NumPy
    array compiles a program for each shape and dtype (JAX 0.10), device_put none. device_put may keep reading the
    NumPy array's memory (on the CPU), so it is given a copy that nothing else holds. Anything else: jnp.asarray."""
    return jax.device_put(array.copy()) if isinstance(array, np.ndarray) else jnp.asarray(array)


JITTED = type(jax.jit(abs))


def _unjitted(value):
    return value.__wrapped__ if isinstance(value, JITTED) else value


def _eager_passes(passes):
    """The module's _Passes (what its public functions run) with the module's maths and the runtime's own
    jitted functions as the functions they wrap: else every cell's module would be compiled whole, and the
    compiled programs of hundreds of cells exhaust the process's memory maps (XLA then crashes). Its
    segment_loss stays jitted: eagerly, each of the loss's operations would compile for each segment's length,
    where the jitted loss compiles one program for it."""
    eager = dataclasses.replace(passes, forward=_unjitted(passes.forward), gradients=_unjitted(passes.gradients))
    for name, value in vars(eager).items():
        if isinstance(value, JITTED):
            object.__setattr__(eager, name, value.__wrapped__)
    return eager


def _basic_block(index, shape):
    """(starts, sizes, axes dropped) of the block an index of ints and slices of step 1 (an Ellipsis among them)
    picks from an array of shape, else None (any other index: arrays, None, bools, steps, ints out of range)."""
    index = index if isinstance(index, tuple) else (index,)
    ellipses = [k for k, part in enumerate(index) if part is Ellipsis]
    if len(ellipses) > 1 or len(index) - len(ellipses) > len(shape):
        return None
    if ellipses:
        at = ellipses[0]
        index = index[:at] + (slice(None),) * (len(shape) - len(index) + 1) + index[at + 1 :]
    index += (slice(None),) * (len(shape) - len(index))
    starts, sizes, dropped = [], [], []
    for axis, (part, size) in enumerate(zip(index, shape, strict=True)):
        if type(part) is int and -size <= part < size:
            starts.append(part % size)
            sizes.append(1)
            dropped.append(axis)
        elif type(part) is slice and all(type(end) in (int, type(None)) for end in (part.start, part.stop, part.step)):
            start, stop, step = part.indices(size)
            if step != 1:
                return None
            starts.append(start)
            sizes.append(max(stop - start, 0))
        else:
            return None
    return tuple(starts), tuple(sizes), tuple(dropped)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _block(array, starts, sizes, dropped):
    """The block of array at starts (traced: one program for every start) of sizes, the axes dropped squeezed."""
    return jax.lax.squeeze(jax.lax.dynamic_slice(array, starts, sizes), dropped)


def _indexed(taken):
    """ArrayImpl.__getitem__ with its basic blocks (ints and slices of step 1) taken by one jitted dynamic slice:
    the same elements as JAX's eager indexing (a dynamic slice too, of the same sizes), dispatched as a compiled call
    (about a tenth of its cost per operation: the module's slices of stacked gates, steps and rows); any other index
    as JAX takes it."""

    def getitem(array, index, /):
        block = _basic_block(index, array.shape)
        if block is None:
            return taken(array, index)
        if block[1] == array.shape and not block[2]:
            return array  # the whole array, as JAX gives it
        return _block(array, *block)

    return getitem


RUNTIME = "bptt.runtime.jax"  # the runtime's module whose argument checks call _finite


def _one_by_one(finite):
    """The runtime's _finite (jitted over a list of arrays: a program for each list of shapes, so one for each
    cell's parameters) as NumPy answers it of concrete arrays, each read where it lies (the CPU's memory): no
    program compiled, none dispatched; of traced ones (under jit), the runtime's _finite on each alone."""

    def each(arrays):
        if any(isinstance(array, jax.core.Tracer) for array in arrays):
            return functools.reduce(jnp.logical_and, [finite([array]) for array in arrays], jnp.bool_(True))
        return all(bool(np.isfinite(np.asarray(array)).all()) for array in arrays)

    return each


@contextlib.contextmanager
def eagerly(module):
    """Within: the module's jitted functions are the functions they wrap, the runtime's _finite NumPy's answer
    (_one_by_one), jax.lax.scan a loop, and a concrete array's basic indexing one compiled call (_indexed)."""
    jitted = {name: value for name, value in vars(module).items() if isinstance(value, JITTED)}
    runtime = sys.modules.get(RUNTIME)
    finite = vars(runtime).get("_finite") if runtime is not None else None
    passes = vars(module).get("_PASSES")
    sweeps = vars(module).get("_SWEEPS")  # a model with reverse-time states: each group's _Passes
    scan, taken = jax.lax.scan, ArrayImpl.__getitem__
    try:
        for name, function in jitted.items():
            setattr(module, name, function.__wrapped__)
        if finite is not None:
            runtime._finite = _one_by_one(finite)
        if passes is not None:
            module._PASSES = _eager_passes(passes)
        if sweeps is not None:
            groups = tuple(dataclasses.replace(group, passes=_eager_passes(group.passes)) for group in sweeps.sweeps)
            module._SWEEPS = dataclasses.replace(sweeps, sweeps=groups)
        jax.lax.scan = python_scan
        ArrayImpl.__getitem__ = _indexed(taken)
        yield module
    finally:
        jax.lax.scan = scan
        ArrayImpl.__getitem__ = taken
        if sweeps is not None:
            module._SWEEPS = sweeps
        for name, function in jitted.items():
            setattr(module, name, function)
        if finite is not None:
            runtime._finite = finite
        if passes is not None:
            module._PASSES = passes
