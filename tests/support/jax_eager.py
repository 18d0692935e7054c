"""A generated JAX module run eagerly, operation by operation, as jax.disable_jit() would, but with
each operation dispatched as JAX does outside jit (about a tenth of disable_jit's cost per
operation): its jitted functions called as the Python functions they wrap, its scans as Python loops
(jax.lax.scan's own loop under disable_jit). For many small modules, each of which compiled whole
would take seconds."""

import contextlib

import jax
import jax.numpy as jnp


def python_scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """jax.lax.scan as the loop it is under jax.disable_jit()."""
    steps = length if length is not None else jax.tree.leaves(xs)[0].shape[0]
    carry, ys = init, []
    for t in reversed(range(steps)) if reverse else range(steps):
        carry, y = f(carry, jax.tree.map(lambda x, t=t: x[t], xs))
        ys.append(y)
    if reverse:
        ys.reverse()
    return carry, jax.tree.map(lambda *steps: jnp.stack(steps), *ys)


@contextlib.contextmanager
def eagerly(module):
    """Within: the module's jitted functions are the functions they wrap, and jax.lax.scan a loop."""
    jitted = {name: value for name, value in vars(module).items() if isinstance(value, type(jax.jit(abs)))}
    scan = jax.lax.scan
    try:
        for name, function in jitted.items():
            setattr(module, name, function.__wrapped__)
        jax.lax.scan = python_scan
        yield module
    finally:
        jax.lax.scan = scan
        for name, function in jitted.items():
            setattr(module, name, function)
