"""Window truncation when a flow from step t+1 reads an adjoint computed outside the recursion: here
z_t = tanh(U c_{t-1} + W_z x_t) and h_t = z_t * c_t, so dL/dz_{t+1} comes from the head alone, yet it
flows back into c_t. In a window it enters that flow at age 0; added to every age of the flow (as it
was, for a drawn random cell), each output's gradient counted it up to k times and was off by 4e-2 at
k = 2. Every backend, against the oracle, in windows of 1 to 3 steps and in full BPTT."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import jax
from test_oracle import random_problem
from test_oracle_cells import generate

from bptt.codegen.backends import BACKENDS
from bptt.tests.support.oracle import compare
from bptt.tests.support.window_cells import local_flow


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_local_adjoint_enters_the_window_at_age_0(backend):
    model = local_flow()
    problem = random_problem(model, seed=5)
    module = generate(model, backend)
    with jax.disable_jit():
        for truncate in (None, ("window", 1), ("window", 2), ("window", 3)):
            compare(module, model, *problem, truncate=truncate)
