"""Blocks of consecutive columns of a parameter, as a layer that reads two chains writes them (W_ih2[:, :h] h1f_t +
W_ih2[:, h:2h] h1b_t, in torch's layout with blocks of rows too) and as a head reads them (V[:, h:2h] h1b_t), in
every backend against the oracle (tests/support/oracle.py, which shares no code with codegen): full BPTT, the
truncations and forward mode. test_oracle_cells.py proves the small cell (elman2_chains) in full BPTT and the
truncations; the documents of examples/lstm_two_chains.py are compiled with the examples' (tests/documents)."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import pathlib

import sympy as sp
from test_oracle import random_problem
from test_oracle_cells import CELLS_FILE, TRUNCATIONS, generate

from bptt.codegen.array_names import code_name
from bptt.codegen.backends import BACKENDS
from bptt.derive.models import load
from bptt.tests.support.jax_eager import eagerly
from bptt.tests.support.oracle import compare, run

EXAMPLE = f"{pathlib.Path(__file__).resolve().parents[2] / 'examples' / 'lstm_two_chains.py'}:lstm"


@pytest.fixture(scope="module")
def two_chain_lstm():
    """The example's model, a batch, and the oracle's result in full BPTT and in each truncation."""
    model = load(EXAMPLE)
    problem = random_problem(model, seed=27)
    return model, problem, {mode: run(model, *problem, truncate) for mode, truncate in TRUNCATIONS.items()}


@pytest.mark.slow(seconds=40)
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_two_chain_lstm_agrees_with_the_oracle(backend, two_chain_lstm):
    """Outputs, loss and every gradient to 1e-12 in full BPTT and forward mode, and (NumPy and torch) in a window
    and chunks; JAX eagerly (jax_eager.py), as compiling this module's forward mode takes most of a minute."""
    model, problem, expected = two_chain_lstm
    module = generate(model, backend)
    if backend == "jax":
        with eagerly(module):
            compare(module, model, *problem, forward_mode=True, expected=expected["full"])
        return
    for mode, truncate in TRUNCATIONS.items():
        compare(module, model, *problem, truncate, forward_mode=truncate is None, expected=expected[mode])


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_mode_of_two_elman_chains_agrees_with_the_oracle(backend):
    """The small cell's forward mode: each block of columns' direction applied to its operand placed in its
    columns (W_ih2[:, h:2h]'s to h1b_t, V[:, h:2h]'s to h1b_t)."""
    model = load(f"{CELLS_FILE}:elman2_chains")
    problem = random_problem(model, seed=5)
    module = generate(model, backend)
    if backend == "jax":
        with eagerly(module):
            compare(module, model, *problem, forward_mode=True)
    else:
        compare(module, model, *problem, forward_mode=True)


def test_blocks_of_other_columns_have_other_code_names():
    """The stacked weights and gradient products of a parameter's blocks are named by their first row and column:
    two blocks of the same rows and other columns never share an array."""
    h = sp.Symbol("h")
    W = sp.MatrixSymbol("W_ih2", 4 * h, 2 * h)
    names = [code_name(W[:h, :h]), code_name(W[:h, h : 2 * h]), code_name(W[h : 2 * h, :])]
    assert names == ["W_ih2_0", "W_ih2_0_h", "W_ih2_h"]
