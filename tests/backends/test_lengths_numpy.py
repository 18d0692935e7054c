"""lengths= in the NumPy modules (and torch's, for random cells): a right-padded batch equals each of its
sequences run alone (B = 1, T = its length) through the same module and through the oracle, for every zoo model
and random cells of the model language, in full BPTT, window, chunk and random truncation and with checkpoints
(tests/support/padded.py); bad lengths are refused in one line."""

import pytest

pytest.importorskip("torch", reason="the oracle needs torch (pip install 'bptt[torch]')")

import functools
import types

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bptt.codegen.backends import BACKENDS
from bptt.codegen.printing.printer import PrintError
from bptt.derive.adjoint import NoRule
from bptt.derive.model import ModelError
from bptt.derive.models import load
from bptt.tests.oracle.test_oracle import random_problem
from bptt.tests.support import oracle
from bptt.tests.support.cell_plans import random_values
from bptt.tests.support.cells import cells
from bptt.tests.support.modules import module_of
from bptt.tests.support.padded import assert_padded_as_alone, lengths_drawn, oracle_alone, oracle_truncation
from bptt.tests.support.zoo import supporting

T, B = 6, 4
REFUSALS = (ModelError, NoRule, PrintError)
MODES = [None, ("window", 2), ("chunk", 2), ("random", 0.5)]
# with test_lengths_torch.py and test_lengths_jax.py: the oracle's runs of each sequence alone (zoo_alone) once for all
XDIST_GROUP = "padded zoo batches"


def zoo_values(model, seed):
    """(params, xs, ys, initial) of a zoo model at distinct sizes d=2, h=3, q=4, float64, T steps, B sequences."""
    return random_problem(model, seed, steps=T, batch=B)


def zoo_alone(name, seed, truncate):
    """oracle_alone of the padded batch of zoo_values(model, seed) and lengths_drawn(rng(seed)): the oracle's run of
    each sequence alone in the truncation it runs for truncate (random truncation's: full BPTT), the same numbers
    for every backend's module, with or without checkpoints; computed once, read-only."""
    return _zoo_alone(name, seed, oracle_truncation(truncate))


@functools.cache
def _zoo_alone(name, seed, truncate):
    model, lengths = load(name), lengths_drawn(np.random.default_rng(seed), T, B)
    return [oracle.read_only(result) for result in oracle_alone(model, zoo_values(model, seed), lengths, truncate)]


@pytest.mark.parametrize("truncate", MODES, ids=lambda mode: "full" if mode is None else mode[0])
@pytest.mark.parametrize("name", supporting("truncate"))
def test_zoo_padded_batch_is_each_sequence_alone(name, truncate):
    model = load(name)
    values = zoo_values(model, seed=len(name))
    lengths, truths = lengths_drawn(np.random.default_rng(len(name)), T, B), zoo_alone(name, len(name), truncate)
    assert_padded_as_alone(module_of(model.name), model, values, lengths, truncate, truths=truths)


@pytest.mark.parametrize("checkpoints", [1, 2])
@pytest.mark.parametrize("truncate", [None, ("chunk", 2), ("window", 2)], ids=["full", "chunk", "window"])
@pytest.mark.parametrize("name", ["elman", "lstm", "linear", "jordan"])
def test_zoo_padded_batch_with_checkpoints(name, truncate, checkpoints):
    model = load(name)
    lengths, truths = lengths_drawn(np.random.default_rng(3), T, B), zoo_alone(name, 3, truncate)
    assert_padded_as_alone(module_of(model.name), model, zoo_values(model, 3), lengths, truncate, checkpoints, truths)


def cell_module(model, backend):
    """The model's module for a backend, rendered in memory; None if codegen refuses the cell (a documented
    refusal: tests/oracle/test_random_cells.py proves those)."""
    try:
        source = BACKENDS[backend].module_source(model)
    except REFUSALS:
        return None
    module = types.ModuleType(f"padded_cell_{model.name}_{backend}")
    exec(compile(source, f"<{model.name} {backend}>", "exec"), module.__dict__)
    return module


@settings(max_examples=16, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    model=cells(),
    truncate=st.sampled_from(MODES),
    checkpoints=st.sampled_from([None, 1]),
    seed=st.integers(0, 99),
    backend=st.sampled_from(["numpy", "torch"]),
)
def test_random_cells_padded_batch_is_each_sequence_alone(model, truncate, checkpoints, seed, backend):
    """NumPy or torch (drawn), in a drawn truncation, with or without checkpoints."""
    module = cell_module(model, backend)
    if module is None:
        return
    values = random_values(model, T, B, seed)
    lengths = lengths_drawn(np.random.default_rng(seed), T, B)
    assert_padded_as_alone(module, model, values, lengths, truncate, checkpoints)


BAD = [
    (np.array([6, 0, 1, 2]), "lengths holds 0; each sequence's length must be in 1..T (T=6)"),
    (np.array([7, 3, 1, 2]), "lengths holds 7; each sequence's length must be in 1..T (T=6)"),
    (np.array([6.0, 3, 1, 2]), "lengths must be an integer array of shape (B,)=(4,), one length per sequence; got"),
    (np.array([6, 3, 1]), "lengths has shape (3,); expected (B,)=(4,), one length per sequence"),
    (np.array([[6, 3, 1, 2]]), "lengths has shape (1, 4); expected (B,)=(4,)"),
    ("6,3,1,2", "lengths must be an integer array of shape (B,)=(4,)"),
]


@pytest.mark.parametrize(("lengths", "message"), BAD, ids=lambda value: repr(value)[:20])
@pytest.mark.parametrize("call", ["forward", "loss_and_grads", "losses", "backward"])
def test_bad_lengths_are_refused_in_one_line(call, lengths, message):
    module = module_of("elman")
    params, xs, ys, _ = zoo_values(load("elman"), 0)
    with pytest.raises(ValueError) as error:
        if call == "forward":
            module.forward(params, xs, lengths=lengths)
        elif call == "loss_and_grads":
            module.loss_and_grads(params, xs, ys, lengths=lengths)
        elif call == "losses":
            module.losses(module.forward(params, xs)[0], ys, lengths=lengths)
        else:
            outputs, cache = module.forward(params, xs, lengths=np.array([6, 3, 1, 2]))
            module.backward(params, {**cache, "lengths": lengths}, outputs)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_lengths_all_t_is_the_unpadded_call():
    """Every length T: the same numbers as no lengths, bit for bit (no masking work is done)."""
    module, model = module_of("lstm"), load("lstm")
    params, xs, ys, _ = zoo_values(model, 1)
    full = np.full(B, T)
    plain, padded = module.loss_and_grads(params, xs, ys), module.loss_and_grads(params, xs, ys, lengths=full)
    assert plain[0] == padded[0] and all(np.array_equal(plain[1][k], padded[1][k]) for k in plain[1])
    outputs = module.forward(params, xs)[0]
    assert np.array_equal(module.losses(outputs, ys, lengths=full), module.losses(outputs, ys))


@pytest.mark.parametrize("suffix", ["", "_torch", "_jax"])
def test_no_steps_with_lengths_names_the_array_without_steps(suffix):
    """xs (or outputs) of T=0 with lengths= is refused for the array, as without lengths= (it blamed lengths: 'lengths
    holds 1; ... must be in 1..T (T=0)')."""
    framework = {"": "numpy", "_torch": "torch", "_jax": "jax"}[suffix]
    pytest.importorskip(framework)
    module = module_of(f"elman{suffix}")
    params, xs, ys, _ = zoo_values(load("elman"), 0)
    to, _ = oracle._framework(module)
    params, empty, lengths = {k: to(v) for k, v in params.items()}, to(xs[:0]), to(np.full(B, 1))
    calls = {
        "xs": lambda: module.forward(params, empty, lengths=lengths),
        "xs ": lambda: module.loss_and_grads(params, empty, to(ys[:0]), lengths=lengths),
        "outputs": lambda: module.losses(to(np.zeros((0, B, 5))), to(ys[:0]), lengths=lengths),
    }
    for array, call in calls.items():
        with pytest.raises(ValueError, match=rf"^{array.strip()} has shape \(0, 4, \d\); every dimension must be"):
            call()
