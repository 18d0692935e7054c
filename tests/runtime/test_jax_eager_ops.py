"""What runs cheaply eagerly computes what it replaces, bit for bit: the JAX runtime's _placed (a pad per block, not
a scatter) and _following (one pad), eagerly and under jit; the tests' python_scan (each input unstacked once)
against jax.lax.scan; on_device (device_put) against jnp.asarray, compiling nothing; eagerly's _finite (NumPy's
answer) against the runtime's, which it restores after; eagerly's indexing (a basic block one compiled call)
against JAX's, which it restores after."""

import pytest

jax = pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import jax.numpy as jnp
import numpy as np
from jax._src import compiler
from jax._src.array import ArrayImpl

from bptt.runtime import jax as runtime
from bptt.runtime.jax import _following, _placed
from bptt.tests.support.jax_eager import eagerly, on_device, python_scan

jax.config.update("jax_enable_x64", True)


def same_bits(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))


def scattered(like, *blocks):
    """_placed as it was: each block added in by a scatter."""
    out = jnp.zeros_like(like)
    for index, value in blocks:
        extra = jnp.ndim(value) - out[index].ndim
        if extra > 0:
            out = jnp.broadcast_to(out, jnp.shape(value)[:extra] + out.shape)
        out = out.at[index].add(value)
    return out


def blocks(dtype):
    """Overlapping blocks of rows (Ellipsis first) and of a matrix's rows and columns, a -0.0, and aged values
    (a leading axis the block lacks) that widen the result."""
    rng = np.random.default_rng(0)

    def value(*shape):
        return jnp.asarray(rng.standard_normal(shape), dtype)

    return [
        (jnp.s_[..., :2], value(3, 2)),
        (jnp.s_[..., 2:8], value(3, 6)),
        (jnp.s_[1:2, 3:], jnp.asarray(-0.0, dtype)),
        (jnp.s_[..., 1:4], value(4, 3, 3)),
        (jnp.s_[..., 5:7], value(4, 3, 2)),
    ]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_placed_adds_each_block_as_a_scatter_would(dtype):
    like = jnp.zeros((3, 8), dtype)
    given = blocks(dtype)
    expected = scattered(like, *given)
    same_bits(_placed(like, *given), expected)
    indices = [index for index, _ in given]
    jitted = jax.jit(lambda like, *values: _placed(like, *zip(indices, values, strict=True)))
    same_bits(jitted(like, *[value for _, value in given]), expected)
    assert "scatter" not in str(jax.make_jaxpr(lambda like: _placed(like, *given))(like))


def test_following_is_the_next_steps_then_zero_or_after():
    values = jnp.asarray(np.random.default_rng(1).standard_normal((5, 2, 3))).at[2, 0, 0].set(-0.0)
    for after in (None, jnp.ones((2, 3))):
        last = jnp.zeros_like(values[:1]) if after is None else after[None]
        expected = jnp.concatenate([values[1:], last])
        same_bits(_following(values, after), expected)
        same_bits(jax.jit(_following)(values, after), expected)
    same_bits(_following(values[:1]), jnp.zeros_like(values[:1]))


def step(carry, x):
    """A step reading two inputs of a pytree, carrying a sum, stacking a tuple."""
    total = carry + x["a"] * x["b"][0]
    return total, (total, x["a"] - 1)


@pytest.mark.parametrize("reverse", [False, True])
def test_python_scan_is_jax_lax_scan(reverse):
    rng = np.random.default_rng(2)
    xs = {"a": jnp.asarray(rng.standard_normal((4, 3))), "b": jnp.asarray(rng.standard_normal((4, 2, 3)))}
    init = jnp.zeros(3)
    expected = jax.lax.scan(step, init, xs, reverse=reverse)
    got = python_scan(step, init, xs, reverse=reverse)
    for one, other in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        same_bits(one, other)

    def counting(carry, _):
        return carry + 1, carry

    same_bits(python_scan(counting, 0, length=3)[1], jax.lax.scan(counting, 0, length=3)[1])


def test_on_device_is_jnp_asarray_and_compiles_nothing(monkeypatch):
    compiled = []
    compile_program = compiler.compile_or_get_cached  # a program compiled, or loaded from the tests' shared cache

    def counted(*args, **kwargs):
        compiled.append(args)
        return compile_program(*args, **kwargs)

    monkeypatch.setattr(compiler, "compile_or_get_cached", counted)
    for dtype in (np.float64, np.float32, np.int64, np.bool_):
        array = (np.random.default_rng(3).standard_normal((2, 7, 3)) * 5).astype(dtype)
        before = array.copy()
        got = on_device(array)
        array[0, 0, 0] = not array[0, 0, 0]  # a copy: the NumPy array's later changes do not reach it
        assert isinstance(got, jax.Array) and not got.weak_type
        same_bits(got, before)
    assert compiled == []
    same_bits(on_device([1, 2]), jnp.asarray([1, 2]))


def test_eagerly_checks_finite_arrays_as_the_runtime_checks_them():
    runtime_finite = runtime._finite
    good = [jnp.ones((2, 3)), jnp.zeros(4), jnp.full((1, 2, 2), -0.0)]
    lists = [
        good,
        [],
        *([*good[:i], good[i].at[..., 0].set(bad), *good[i + 1 :]] for i in range(3) for bad in (np.nan, np.inf)),
    ]
    module = type(jax)("no_jits")
    with eagerly(module):
        assert runtime._finite is not runtime_finite
        got = [bool(runtime._finite(arrays)) for arrays in lists]
        traced = [bool(jax.jit(runtime._finite)(arrays)) for arrays in lists[::3]]  # under jit: the runtime's
    assert runtime._finite is runtime_finite
    assert got == [bool(runtime_finite(arrays)) for arrays in lists] == [True, True] + [False] * 6
    assert traced == got[::3]


INDICES = [
    *(jnp.s_[2:5], jnp.s_[1:], jnp.s_[:-1], jnp.s_[3], jnp.s_[-1], jnp.s_[..., 1:3], jnp.s_[:, 0], jnp.s_[1:, ..., 2]),
    *(jnp.s_[5:2], jnp.s_[6:], jnp.s_[:, :, -3:], jnp.s_[2, 1, 3], jnp.s_[...], jnp.s_[:], jnp.s_[:, :]),
    *(jnp.s_[None], jnp.s_[::2], jnp.s_[::-1], jnp.s_[np.int64(1)], jnp.s_[True], jnp.s_[jnp.arange(2)]),
    *(jnp.s_[6], jnp.s_[-7]),
]  # basic blocks, empty ones and whole arrays, then what JAX takes its own way (ints out of range too)


def test_eagerly_indexes_as_jax_indexes_and_restores_it():
    taken = ArrayImpl.__getitem__
    array = jnp.asarray(np.random.default_rng(4).standard_normal((6, 3, 4)))
    expected = [array[index] for index in INDICES]
    with eagerly(type(jax)("no_jits")):
        assert ArrayImpl.__getitem__ is not taken
        got = [array[index] for index in INDICES]
    assert ArrayImpl.__getitem__ is taken
    for one, other in zip(got, expected, strict=True):
        assert one.shape == other.shape and one.weak_type == other.weak_type
        same_bits(one.reshape(-1), other.reshape(-1))
