"""Forward mode of a parameter's transpose (issue 28): each runtime's _transposed_directions(v, cols) is M_dot^T v for
every direction M_dot = E_ij of a (rows, cols) matrix, (i, j) row-major, on a matrix that is not square."""

import numpy as np
import pytest

ROWS, COLS, BATCH = 3, 2, 4


def expected(v):
    out = np.zeros((ROWS * COLS, BATCH, COLS))
    for i in range(ROWS):
        for j in range(COLS):
            direction = np.zeros((ROWS, COLS))
            direction[i, j] = 1
            out[i * COLS + j] = v @ direction  # (E_ij^T v) in row form: v E_ij
    return out


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_transposed_directions(backend):
    runtime = pytest.importorskip(f"bptt.runtime.{backend}")
    v = np.random.default_rng(3).standard_normal((BATCH, ROWS))
    if backend == "torch":
        import torch

        got = runtime._transposed_directions(torch.from_numpy(v), COLS).numpy()
    elif backend == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        got = np.asarray(runtime._transposed_directions(jax.numpy.asarray(v), COLS))
    else:
        got = runtime._transposed_directions(v, COLS)
    np.testing.assert_allclose(got, expected(v), rtol=0, atol=1e-15)
