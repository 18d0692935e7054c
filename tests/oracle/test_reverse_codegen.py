"""Reverse-time states in the generated code (issue 27): a model is split into forward-only groups of steps
(derive/sweep_models.py), each printed by the backend's render and run by the runtime one after the other. Each
module against the oracle (tests/support/oracle.py, written from the equations): the bidirectional Elman tagger and
its two-layer cell, a two-layer bidirectional LSTM in torch's layout (layer 2 reads both directions of layer 1
through column blocks), random cells run in reverse time, to 1e-12 in float64; a padded batch (lengths=) equals
each sequence run alone, a reverse state starting at its own sequence's last step; what is not supported yet is
refused in one line."""

import pytest

pytest.importorskip("torch", reason="the oracle needs torch (pip install 'bptt[torch]')")

import contextlib
import dataclasses
import functools

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_oracle_cells import generate

from bptt.derive.direction import reverse_states
from bptt.derive.model import ModelError
from bptt.derive.nodes import SeqAt, t
from bptt.derive.sweep_models import sweep_models
from bptt.examples.birnn import birnn, two_layers
from bptt.examples.lstm_two_chains import lstm
from bptt.tests.support import oracle
from bptt.tests.support.cell_plans import random_values
from bptt.tests.support.cells import cells
from bptt.tests.support.jax_eager import eagerly
from bptt.tests.support.padded import assert_padded_as_alone, oracle_alone

T, B = 5, 3
XDIST_GROUP = "reverse cells' modules"  # with test_reverse_truncation.py: module_of's modules generated once for both


def bidirectional_lstm():
    """examples/lstm_two_chains.py's two-layer LSTM with its chains b run in reverse time (h1b, c1b, h2b, c2b read at
    t+1), as torch.nn.LSTM(num_layers=2, bidirectional=True) runs them."""
    model = lstm()
    backward = {"h1b", "c1b", "h2b", "c2b"}

    def flip(rhs):
        flipped = [r for r in rhs.atoms(SeqAt) if r.name in backward and r.time != t]
        later = {r: SeqAt(r.name, t + 1, r.rows, r.role) for r in flipped}
        return rhs.xreplace(later)

    steps = tuple((seq, flip(rhs)) for seq, rhs in model.steps)
    return dataclasses.replace(model, name="bilstm", steps=steps)


CELLS = {"birnn": birnn, "birnn-2layer": two_layers, "bilstm": bidirectional_lstm}
CASES = [(name, backend) for name in CELLS for backend in ("numpy", "torch")]  # JAX (slower) on one cell each
# JAX runs eagerly, each operation compiled once per shape and process: its two cases share their shapes (a batch of
# len(JAX_LENGTHS) sequences, and sequences alone), so that the second compiles little of its own
JAX_LENGTHS = np.array([T, 2])


@functools.cache
def model_of(name):
    return CELLS[name]()


@functools.cache
def module_of(name, backend):
    """The generated module of CELLS[name] for the backend, once per process for every test here."""
    return generate(model_of(name), backend)


def values(model, seed, steps=T, batch=B):
    """(params, xs, ys, initial keyed by state name) at d=2, h=3, q=4 (random_values' distinct sizes)."""
    return random_values(model, steps, batch, seed)


@functools.cache
def oracle_of(name, seed, truncate=None, steps=T, batch=B):
    """The oracle's run of values(model_of(name), seed, steps, batch) in truncate (not random: its weights are each
    backend's own draws): the same numbers for every backend's module, computed once, read-only."""
    model = model_of(name)
    return oracle.read_only(oracle.run(model, *values(model, seed, steps, batch), truncate))


@functools.cache
def oracle_alone_of(name, seed, lengths, truncate=None, steps=T):
    """oracle_alone of the padded batch values(model_of(name), seed, steps, len(lengths)) (lengths a tuple): the
    oracle's run of each sequence alone, the same numbers for every backend's module, computed once, read-only."""
    model = model_of(name)
    found = oracle_alone(model, values(model, seed, steps, len(lengths)), np.array(lengths), truncate)
    return [oracle.read_only(result) for result in found]


@pytest.mark.parametrize(("name", "backend"), [*CASES, ("birnn-2layer", "jax")])
def test_a_bidirectional_model_equals_the_oracle(name, backend):
    model = model_of(name)
    assert len(sweep_models(model)) >= 2
    batch = len(JAX_LENGTHS) if backend == "jax" else B
    params, xs, ys, initial = values(model, seed=27, batch=batch)
    module, expected = module_of(name, backend), oracle_of(name, 27, batch=batch)
    with eagerly(module) if backend == "jax" else contextlib.nullcontext():  # JAX uncompiled: seconds, not a minute
        oracle.compare(module, model, params, xs, ys, initial, expected=expected)


@pytest.mark.parametrize(("name", "backend"), [*CASES, ("birnn", "jax")])
def test_a_padded_bidirectional_batch_is_each_sequence_alone(name, backend):
    model = model_of(name)
    lengths = JAX_LENGTHS if backend == "jax" else np.array([2, T, 1, 4])
    module, truths = module_of(name, backend), oracle_alone_of(name, 5, tuple(lengths.tolist()))
    with eagerly(module) if backend == "jax" else contextlib.nullcontext():
        assert_padded_as_alone(module, model, values(model, 5, batch=len(lengths)), lengths, truths=truths)


def partly_mirrored(model, every):
    """The model with every `every`-th of its states (from the first) read at t+1 instead of t-1."""
    flipped = {seq.name for seq in model.states[::every]}

    def flip(rhs):
        later = [r for r in rhs.atoms(SeqAt) if r.name in flipped and r.time == t - 1]
        return rhs.xreplace({r: SeqAt(r.name, t + 1, r.rows, r.role) for r in later})

    steps = tuple((seq, flip(rhs)) for seq, rhs in model.steps)
    try:
        return dataclasses.replace(model, name=f"{model.name}-reversed", steps=steps)
    except ModelError:  # directions that depend on each other in a cycle
        return None


@settings(max_examples=8, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(cells(), st.sampled_from([1, 2]))
def test_a_random_cell_with_reverse_states_equals_the_oracle(model, every):
    """Random cells with every state (every=1) or every other state (every=2) run in reverse time: groups of one
    direction after another, side reads, several values handed on."""
    assume(not model.teacher_forcing and model.inputs[0].role != "label")
    mirror = partly_mirrored(model, every)
    assume(mirror is not None and reverse_states(mirror))
    module = generate(mirror, "numpy")
    params, xs, ys, initial = random_values(mirror, 4, 2, seed=0)
    oracle.compare(module, mirror, params, xs, ys, initial)


def test_forward_mode_is_refused_in_one_line():
    """(Truncation works: test_reverse_truncation.py; checkpoints: test_reverse_checkpoints.py.)"""
    model, module = model_of("birnn"), module_of("birnn", "numpy")
    params, xs, ys, _ = values(model, 1)
    with pytest.raises(ValueError, match="forward_mode_grads"):
        module.forward_mode_grads(params, xs, ys)


def test_torchs_model_on_a_packed_sequence_equals_the_padded_numpy_call():
    """torch's Model of the two-layer bidirectional LSTM, fed a PackedSequence of unsorted lengths, returns its
    outputs packed the same way; its loss and every gradient (parameters, initial states) equal the NumPy module's
    loss_and_grads with those lengths (itself each sequence alone, above), to 1e-12."""
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    model = model_of("bilstm")
    lengths = np.array([3, T, 1, 4])
    params, xs, ys, initial = values(model, 8, batch=len(lengths))
    states = {f"{seq.name}0": initial[seq.name] for seq in model.states}
    loss, grads = module_of("bilstm", "numpy").loss_and_grads(params, xs, ys, **states, lengths=lengths)
    module = module_of("bilstm", "torch")
    net = module.Model(d=2, h=3, q=4, dtype=torch.float64)
    with torch.no_grad():
        for name, value in params.items():
            getattr(net, name).copy_(torch.tensor(value))
    leaves = {key: torch.tensor(value, requires_grad=True) for key, value in states.items()}
    packed = pack_padded_sequence(torch.tensor(xs), torch.tensor(lengths), enforce_sorted=False)
    out = net(packed, **leaves)
    assert isinstance(out, torch.nn.utils.rnn.PackedSequence) and torch.equal(out.batch_sizes, packed.batch_sizes)
    outputs, _ = pad_packed_sequence(out, total_length=T)
    total = net.loss(outputs, torch.tensor(ys), lengths=torch.tensor(lengths))
    total.backward()
    assert abs(float(total.detach()) - loss) <= 1e-12 * max(1.0, abs(loss))
    found = {name: getattr(net, name).grad for name in module.PARAMS} | {k: v.grad for k, v in leaves.items()}
    for key, value in grads.items():
        error = np.abs(found[key].numpy() - value).max() / max(1.0, np.abs(value).max())
        assert error <= 1e-12, f"gradient {key} differs by {error:.2e}"
