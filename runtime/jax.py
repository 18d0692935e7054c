"""The JAX backend's runtime: what a generated JAX module runs besides its model's maths (argument checks,
truncation weights, the flows of the backward pass, the helpers its printed code calls). A model's facts
come in as its _Spec."""

import functools

import jax
import jax.numpy as jnp

from bptt.runtime.checks import _check_param_keys
from bptt.runtime.common import _check_g_max, _check_shape, _param_sizes, _params_dtype
from bptt.runtime.options import _Truncation


def clip_grads(grads, g_max):
    """Rescale grads by min(1, g_max / ||g||), ||g|| the global norm over all arrays (jit-compatible: a
    traced g_max is not checked)."""
    if not isinstance(g_max, jax.core.Tracer):
        g_max = _check_g_max(g_max)
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in grads.values()))
    scale = jnp.where(norm > 0, jnp.minimum(1.0, g_max / jnp.where(norm > 0, norm, 1.0)), 1.0)
    return {name: g * scale.astype(g.dtype) for name, g in grads.items()}


def _truncation(truncate, rng):
    """The Truncation of a truncate argument (options.py), rng checked for random truncation."""
    truncation = _Truncation.of(truncate)
    if truncation.randomized:
        _check_rng(rng)
    return truncation


def _check_rng(rng):
    """rng for random truncation: a JAX PRNG key, else ValueError."""
    if not _is_key(rng):
        raise ValueError(f"truncate=('random', pi) needs rng=jax.random.key(seed), got rng={rng!r}")


def _is_key(rng):
    """A JAX PRNG key: a typed key (jax.random.key) or a raw uint32 pair (jax.random.PRNGKey)."""
    if not isinstance(rng, jax.Array):
        return False
    if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key):
        return rng.ndim == 0
    return rng.dtype == jnp.uint32 and rng.shape == (2,)


def _keep_weights(truncation, T, rng, dtype):
    """keep[t]: the weight of the gradient flowing from step t+1 back into step t, t = 0..T-1: ones but
    for chunks and random truncation (compiled once per mode, k or pi, T and dtype)."""
    if truncation.weighted:
        return _truncated_keep(truncation, T, rng, dtype)
    return jnp.ones(T, dtype)


def _cut_or_drawn(truncation, T, rng, dtype):
    """Chunks: cut at steps k, 2k, ...; random: xi_{t+1} = (u_t < pi) / pi for the uniforms
    u = jax.random.uniform(rng, (T,)), drawn in float64 if x64 is on, else in float32."""
    k = pi = truncation.value
    if truncation.chunked:
        steps = jnp.arange(T)
        return ((steps % k != 0) | (steps == 0)).astype(dtype)  # h_k, h_2k, ... enter the next step detached
    u = jax.random.uniform(rng, (T,), dtype=jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
    return ((u < pi) / pi).astype(dtype)


_truncated_keep = jax.jit(_cut_or_drawn, static_argnums=(0, 1, 3))


def _ages(truncation):
    """k + 1 ages (0..k steps flowed) for a window of k steps, else None (no age axis)."""
    return truncation.ages if truncation.windowed else None


def _following(values, after=None):
    """values at step t+1 for t = 1..T: at T, after (the value at step 1 of the next segment of steps), or
    zero (nothing follows the last step)."""
    if after is None:  # one operation: the first step dropped, a zero step padded after the last
        return jax.lax.pad(values, jnp.zeros((), values.dtype), [(-1, 1, 0)] + [(0, 0, 0)] * (values.ndim - 1))
    return jnp.concatenate([values[1:], jnp.asarray(after, values.dtype)[None]])


@functools.partial(jax.jit, static_argnums=2)
def _steps_from(array, start, count):
    """count steps of array from step start (traced: one program for every start)."""
    return jax.lax.dynamic_slice_in_dim(array, start, count)


@jax.jit
def _step_at(array, step):
    """array's step `step` (traced: one program for every step)."""
    return jax.lax.dynamic_index_in_dim(array, step, keepdims=False)


def _fresh(local, ages):
    """An adjoint's local terms, at age 0 when a window gives adjoints an age axis (ages = k + 1)."""
    if ages is None:
        return local
    return jnp.concatenate([local[None], jnp.zeros((ages - 1,) + local.shape, local.dtype)])


def _flow(value, keep_t, ages):
    """The gradient flowing back from step t+1, weighted by keep_t; one age older in a window
    (the oldest age dropped)."""
    value = value * keep_t
    if ages is None:
        return value
    return jnp.concatenate([jnp.zeros_like(value[:1]), value[:-1]])


def _total(adjoint, ages):
    """An adjoint summed over its ages (the adjoint itself without a window)."""
    return adjoint if ages is None else adjoint.sum(axis=0)


def _directions(v, rows):
    """M_dot v for every direction M_dot = E_ij of a (rows, cols) matrix, (i, j) row-major:
    shape (rows * cols, B, rows) for v of shape (B, cols)."""
    out = jnp.einsum("ik,bj->ijbk", jnp.eye(rows, dtype=v.dtype), v)  # out[i, j, b, k] = [i = k] v[b, j]
    return out.reshape((rows * v.shape[-1],) + v.shape[:-1] + (rows,))


def _transposed_directions(v, cols):
    """M_dot^T v for every direction M_dot = E_ij of a (rows, cols) matrix, (i, j) row-major:
    shape (rows * cols, B, cols) for v of shape (B, rows)."""
    out = jnp.einsum("jk,bi->ijbk", jnp.eye(cols, dtype=v.dtype), v)  # out[i, j, b, k] = [j = k] v[b, i]
    return out.reshape((v.shape[-1] * cols,) + v.shape[:-1] + (cols,))


def _softmax_cross_entropy(s, y, count):
    """(sum_t -log softmax(s_t)[y_t] / count, its gradient (softmax(s_t) - onehot(y_t)) / count). count: a
    number, or an array of one per step and sample (T, B) (lengths=: inf at a padded step, which weighs nothing)."""
    log_p = jax.nn.log_softmax(s, axis=-1)
    grad = jnp.exp(log_p) - jax.nn.one_hot(y, s.shape[-1], dtype=s.dtype)
    if jnp.ndim(count):
        share = 1 / count
        return -(jnp.take_along_axis(log_p, y[..., None], axis=-1)[..., 0] * share).sum(), grad * share[..., None]
    loss = -jnp.take_along_axis(log_p, y[..., None], axis=-1).sum() / count
    return loss, grad / count


def _squared_error(s, y, count):
    """(sum_t 1/2 ||s_t - y_t||^2 / count, its gradient (s_t - y_t) / count); count as for _softmax_cross_entropy."""
    difference = s - y
    if jnp.ndim(count):
        share = 1 / count
        return (0.5 * jnp.square(difference).sum(axis=-1) * share).sum(), difference * share[..., None]
    return (0.5 * jnp.square(difference).sum(axis=-1)).sum() / count, difference / count


def _norm_adjoint(g, hat, sigma, centred=True):
    """A norm's Jacobian times g (derive/norm_adjoint.py): (g - mean(g) - hat mean(hat * g)) / sigma, without mean(g)
    for an RMS norm (centred False); O(n) per row, no n x n matrix, the means over the last axis, kept."""
    centre = g.mean(axis=-1, keepdims=True) if centred else 0
    return (g - centre - hat * (hat * g).mean(axis=-1, keepdims=True)) / sigma


def _placed(like, *blocks):
    """The gradient of a parameter read by blocks (of a sequence's value read by row slices): zero, each (index,
    value) block added in at its index; a value with leading axes its block lacks (an aged adjoint's ages)
    widens the result to them."""
    out = jnp.zeros_like(like)
    for index, value in blocks:
        extra = jnp.ndim(value) - out.ndim
        if extra > 0:
            out = jnp.broadcast_to(out, jnp.shape(value)[:extra] + out.shape)
        out = out + _padded(value, index, out.shape, out.dtype)
    return out


def _padded(value, index, shape, dtype):
    """value in dtype, broadcast to the block that index (slices of step 1, Ellipsis) picks from an array of shape,
    zero around it. Added to a sum started from zeros, it adds what out.at[index].add(value) adds (no entry of such
    a sum is -0.0, so adding 0 changes none); run eagerly (jax.disable_jit, the tests' random cells), one cheap
    operation where a scatter's indexing costs ten."""
    index = index if isinstance(index, tuple) else (index,)
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (len(shape) - len(index) + 1) + index[at + 1 :]
    index += (slice(None),) * (len(shape) - len(index))
    starts, block = [], []
    for part, size in zip(index, shape, strict=True):
        start, stop, step = part.indices(size)
        if step != 1:
            raise ValueError(f"_placed takes blocks of slices of step 1, got {part!r}")
        starts.append(start)
        block.append(max(stop - start, 0))
    value = jnp.broadcast_to(jnp.asarray(value, dtype), block)
    edges = [(start, size - start - rows, 0) for start, size, rows in zip(starts, shape, block, strict=True)]
    return jax.lax.pad(value, jnp.zeros((), dtype), edges)


def _scatter_columns(values, labels, columns):
    """sum_t values_t onehot(labels_t)^T: each row of values added into column labels of the result."""
    out = jnp.zeros((columns, values.shape[-1]), values.dtype)
    return out.at[labels.reshape(-1)].add(values.reshape(-1, values.shape[-1])).T


def _check_dtype(dtype):
    """dtype as a JAX dtype: float32 or float64 (float64 needs jax.config.update("jax_enable_x64", True))."""
    try:
        dtype = jnp.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dtype not in (jnp.float32, jnp.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError('dtype float64 needs jax.config.update("jax_enable_x64", True) first')
    return dtype


def _check_params(spec, params, finite=True):
    """The sizes implied by the parameters' shapes, and their common dtype; finite: no nan or inf in them
    (concrete arrays only: under jit the values are not known). If one parameter disagrees with all the
    others, the error names it."""
    _check_param_keys(spec, params)
    dtype = _params_dtype(spec, params, _check_array)
    for name in spec.params:
        _check_array(f"params['{name}']", params[name], spec.shapes[name], {}, dtype, finite=False)
    if finite and not _all_finite([params[name] for name in spec.params]):
        for name in spec.params:
            _check_array(f"params['{name}']", params[name], spec.shapes[name], {}, dtype)  # names the first bad entry
    return _param_sizes(spec, params), dtype


def _check_array(name, array, dims, sizes, dtype, finite=True):
    """array with the named dims (binding sizes not yet known) and the given dtype; if finite, a
    concrete float array must hold no nan or inf (a traced one is not known until it runs)."""
    if not isinstance(array, jax.Array):
        raise ValueError(f"{name} must be a JAX array, got {type(array).__name__}")
    _check_shape(name, array.shape, dims, sizes)
    if array.dtype != dtype:
        raise ValueError(f"{name} has dtype {array.dtype}; expected {jnp.dtype(dtype)} like the parameters")
    if finite and jnp.issubdtype(array.dtype, jnp.floating) and not _all_finite([array]):
        index = tuple(int(i) for i in jnp.argwhere(~jnp.isfinite(array))[0])
        raise ValueError(f"{name} holds {array[index]} at index {index}; expected finite numbers")
    sizes.update(zip(dims, array.shape, strict=True))
    return array


def _all_finite(arrays):
    """No nan or inf in any of the arrays (True while tracing: the values are not known)."""
    finite = _finite(arrays)
    return isinstance(finite, jax.core.Tracer) or bool(finite)


_finite = jax.jit(lambda arrays: jnp.array([jnp.isfinite(array).all() for array in arrays]).all())
_label_range = jax.jit(lambda labels: (labels.min(), labels.max()))


def _check_labels(name, labels, sizes, classes):
    """Integer labels of shape (T, B), each in range(sizes[classes]) (checked on concrete arrays), of any
    integer dtype; returned as int64 (int32 without x64), so that every label dtype runs the same code."""
    if not isinstance(labels, jax.Array) or not jnp.issubdtype(labels.dtype, jnp.integer):
        raise ValueError(
            f"{name} must be an integer JAX array of labels, got {getattr(labels, 'dtype', type(labels).__name__)}"
        )
    _check_array(name, labels, ("T", "B"), sizes, labels.dtype)
    low, high = _label_range(labels)
    if not isinstance(low, jax.core.Tracer) and (low < 0 or high >= sizes[classes]):
        bad = (labels < 0) | (labels >= sizes[classes])
        value = labels[bad][0]
        raise ValueError(
            f"{name} holds label {value}; labels must be in range({sizes[classes]}) ({classes}={sizes[classes]})"
        )
    return labels.astype(jax.dtypes.canonicalize_dtype(jnp.int64))
