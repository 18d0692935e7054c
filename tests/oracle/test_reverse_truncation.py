"""Truncated BPTT with reverse-time states (issue 27): window, chunk and random truncation in the NumPy, torch and JAX
modules of bidirectional models and random cells with reverse states, each truncating each recursion in its own
direction (README, "Truncated BPTT"):
- against the oracle (tests/support/oracle_sweeps.py: the truncation written from the equations, by detaching in
  its own unrolled graph), to 1e-12 in float64; random truncation with the weights each group draws;
- a padded batch (lengths=) equals each sequence run alone, gradients into padding exactly 0
  (tests/support/padded.py), a reverse state's chunks counted from its own sequence's last step;
- a window's reach, read off the initial states' gradients; random truncation exactly unbiased over every keep
  pattern of every group."""

import pytest

pytest.importorskip("torch", reason="the oracle needs torch (pip install 'bptt[torch]')")

import itertools

import numpy as np
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_oracle_cells import generate
from test_reverse_codegen import (  # noqa: F401 (XDIST_GROUP: one unit)
    XDIST_GROUP,
    model_of,
    module_of,
    oracle_alone_of,
    oracle_of,
    partly_mirrored,
    values,
)

from bptt.app.verify.patterns import PatternRng
from bptt.derive.direction import reverse_states
from bptt.derive.refusal import Refusal
from bptt.derive.sweep_models import sweep_models
from bptt.tests.support import oracle
from bptt.tests.support.cell_plans import random_values
from bptt.tests.support.cells import cells
from bptt.tests.support.jax_eager import eagerly
from bptt.tests.support.padded import RANDOM_SEED, assert_padded_as_alone, lengths_drawn

T = 6
MODES = [("window", 2), ("chunk", 2), ("random", 0.5)]
NAMES = ("birnn", "birnn-2layer", "bilstm")
IDS = {"ids": lambda mode: mode[0]}
BACKENDS = ["numpy", "torch"]  # JAX (slower) on one cell each
LENGTHS = np.array([2, T, 1, 5])  # a padded batch's


def drawn_keep(backend, model, steps, pi, seed):
    """{state name: the weights by index that its group's backward draws from a call's rng seeded with seed}: as the
    runtime's group_rngs (runtime/*_sweeps.py) says, one generator per group (in the order the groups run forward)
    seeded from the call's rng once per call, whose uniforms u give (u < pi) / pi."""
    groups = sweep_models(model)
    if backend == "numpy":
        seeds = np.random.default_rng(seed).integers(0, 2**63, size=len(groups))
        draws = [np.random.default_rng(child).random(steps) for child in seeds]
    elif backend == "torch":
        seeds = torch.randint(0, 2**62, (len(groups),), generator=torch.Generator().manual_seed(seed))
        children = [torch.Generator().manual_seed(int(child)) for child in seeds]
        draws = [torch.rand(steps, generator=child, dtype=torch.float64).numpy() for child in children]
    else:
        import jax

        keys = jax.random.split(jax.random.key(seed), len(groups))
        draws = [np.asarray(jax.random.uniform(key, (steps,), dtype=jax.numpy.float64)) for key in keys]
    return {seq.name: (draw < pi) / pi for group, draw in zip(groups, draws, strict=True) for seq in group.states}


def call_rng(backend, seed):
    if backend == "numpy":
        return np.random.default_rng(seed)
    if backend == "torch":
        return torch.Generator().manual_seed(seed)
    import jax

    return jax.random.key(seed)


def assert_agrees_with_the_oracle(module, backend, model, problem, truncate, expected=None):
    """loss_and_grads of the module in truncate against the oracle's (random: given the weights the module draws);
    expected: the oracle's run of a window or chunk, when the caller has it."""
    params, xs, ys, initial = problem
    keep = drawn_keep(backend, model, len(xs), truncate[1], RANDOM_SEED) if truncate[0] == "random" else None
    if expected is None:
        expected = oracle.run(model, params, xs, ys, initial, truncate, keep=keep)
    if keep is None:
        oracle.compare(module, model, params, xs, ys, initial, truncate, expected=expected)
        return
    to_framework, to_numpy = oracle._framework(module)
    states = {f"{seq.name}0": to_framework(initial[seq.name]) for seq in model.states}
    theirs = {name: to_framework(array) for name, array in params.items()}
    rng = call_rng(backend, RANDOM_SEED)
    found = module.loss_and_grads(theirs, to_framework(xs), to_framework(ys), **states, truncate=truncate, rng=rng)
    oracle._agree_gradients("", found, expected, to_numpy, 1e-12)


@pytest.mark.parametrize("truncate", MODES, **IDS)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_truncated_reverse_states_equal_the_oracle(name, backend, truncate):
    model, module = model_of(name), module_of(name, backend)
    expected = None if truncate[0] == "random" else oracle_of(name, 11, truncate, steps=T)
    assert_agrees_with_the_oracle(module, backend, model, values(model, 11, steps=T), truncate, expected)


@pytest.mark.parametrize("truncate", MODES, **IDS)
def test_truncated_reverse_states_equal_the_oracle_in_jax(truncate):
    model, module = model_of("birnn-2layer"), module_of("birnn-2layer", "jax")
    with eagerly(module):
        assert_agrees_with_the_oracle(module, "jax", model, values(model, 12, steps=T, batch=2), truncate)


@pytest.mark.parametrize("truncate", MODES, **IDS)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_a_truncated_padded_batch_is_each_sequence_alone(name, backend, truncate):
    """Each sequence alone also against the oracle (window, chunk): a reverse state's window and chunks count its
    own sequence's steps, from its last."""
    model = model_of(name)
    problem = values(model, 13, steps=T, batch=len(LENGTHS))
    truths = oracle_alone_of(name, 13, tuple(LENGTHS.tolist()), truncate, steps=T)
    assert_padded_as_alone(module_of(name, backend), model, problem, LENGTHS, truncate, truths=truths)


@pytest.mark.parametrize("truncate", MODES[:2], **IDS)
def test_a_truncated_padded_batch_is_each_sequence_alone_in_jax(truncate):
    """JAX's random truncation draws T uniforms that do not begin with the draws of fewer: window and chunk."""
    model, module = model_of("birnn"), module_of("birnn", "jax")
    with eagerly(module):
        assert_padded_as_alone(module, model, values(model, 14, steps=T, batch=2), np.array([T, 3]), truncate)


@settings(max_examples=10, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(cells(), st.sampled_from([1, 2]), st.sampled_from(MODES), st.sampled_from(BACKENDS), st.integers(0, 99))
def test_a_random_cell_with_reverse_states_truncated(model, every, truncate, backend, seed):
    """Random cells with every state (every=1) or every other (every=2) in reverse time, in a drawn truncation and
    backend: against the oracle, and a padded batch against each sequence alone."""
    assume(not model.teacher_forcing and model.inputs[0].role != "label")
    mirror = partly_mirrored(model, every)
    assume(mirror is not None and reverse_states(mirror))
    try:
        module = generate(mirror, backend)
    except Refusal:  # a cell the generated code refuses in one line (test_reverse_codegen.py's concern)
        assume(False)
    assert_agrees_with_the_oracle(module, backend, mirror, random_values(mirror, 5, 2, seed), truncate)
    lengths = lengths_drawn(np.random.default_rng(seed), 5, 3)
    assert_padded_as_alone(module, mirror, random_values(mirror, 5, 3, seed), lengths, truncate)


@pytest.mark.parametrize("j", range(1, T + 1))
def test_a_window_reaches_k_steps_each_way(j):
    """birnn's output at step j alone (d_outputs zero elsewhere) in a window of k = 2: its gradient reaches the
    forward state's initial value (before step 1) iff j <= k, the reverse state's (after step T) iff j > T - k."""
    k, model, module = 2, model_of("birnn"), module_of("birnn", "numpy")
    params, xs, _, initial = values(model, 15, steps=T)
    states = {f"{seq.name}0": initial[seq.name] for seq in model.states}
    outputs, cache = module.forward(params, xs, **states)
    d_outputs = np.zeros_like(outputs)
    d_outputs[j - 1] = np.random.default_rng(j).standard_normal(outputs.shape[1:])
    grads = module.backward(params, cache, d_outputs, truncate=("window", k))
    assert bool(grads["h_f0"].any()) == (j <= k)
    assert bool(grads["h_b0"].any()) == (j > T - k)
    full = module.backward(params, cache, d_outputs)
    assert full["h_f0"].any() and full["h_b0"].any()


@pytest.mark.parametrize(("name", "steps"), [("birnn", 3), ("bilstm", 2)])
def test_random_truncation_is_unbiased_exactly(name, steps, monkeypatch):
    """The expectation over every keep pattern of every group (2**(groups*T) of them, each group's drawn
    independently), each gradient weighted by its probability, equals full BPTT to 1e-12: the groups' weights
    given through group_rngs, the one place the module draws them."""
    pi, model, module = 0.3, model_of(name), module_of(name, "numpy")
    params, xs, ys, initial = values(model, 16, steps=steps, batch=2)
    states = {f"{seq.name}0": initial[seq.name] for seq in model.states}
    groups = len(sweep_models(model))
    total = {}
    for kept in itertools.product((True, False), repeat=groups * steps):
        patterns = [PatternRng(kept[g * steps : (g + 1) * steps]) for g in range(groups)]
        monkeypatch.setattr(module._SWEEPS, "group_rngs", lambda rng, count, patterns=patterns: patterns)
        _, grads = module.loss_and_grads(params, xs, ys, **states, truncate=("random", pi), rng=np.random.default_rng())
        probability = pi ** sum(kept) * (1 - pi) ** (len(kept) - sum(kept))
        for key, value in grads.items():
            total[key] = total.get(key, 0.0) + probability * value
    monkeypatch.undo()
    _, full = module.loss_and_grads(params, xs, ys, **states)
    for key, value in full.items():
        error = np.abs(total[key] - value).max() / np.abs(value).max()
        assert error <= 1e-12, f"{key}: the expectation differs from full BPTT by {error:.2e}"
    one = module.loss_and_grads(params, xs, ys, **states, truncate=("random", pi), rng=np.random.default_rng(1))[1]
    assert any(not np.allclose(one[key], value) for key, value in full.items())


def test_chunks_of_a_reverse_state_count_from_its_own_last_step():
    """birnn at T=5 in chunks of k=2: the module and the oracle detach the reverse state where its own steps from the
    last make a multiple of k (entering steps 3 and 1), which the oracle's weights say too; chunks counted from the
    sequence's start (entering steps 4 and 2) would give other gradients."""
    model, module = model_of("birnn"), module_of("birnn", "numpy")
    params, xs, ys, initial = values(model, 17, steps=5)
    expected = oracle.run(model, params, xs, ys, initial, ("chunk", 2))
    oracle.compare(module, model, params, xs, ys, initial, ("chunk", 2), expected=expected)
    own, from_start = np.array([1.0, 1, 0, 1, 0]), np.array([1.0, 0, 1, 0, 1])  # by index: a flow into step 5 - index
    weighted = oracle.run(model, params, xs, ys, initial, ("random", 1.0), keep={"h_f": own, "h_b": own})
    other = oracle.run(model, params, xs, ys, initial, ("random", 1.0), keep={"h_f": own, "h_b": from_start})
    for key, value in expected.grads.items():
        np.testing.assert_allclose(weighted.grads[key], value, rtol=1e-13, atol=1e-15, err_msg=key)
    assert not np.allclose(other.grads["W_b"], expected.grads["W_b"], rtol=1e-6)
    np.testing.assert_allclose(other.grads["W_f"], expected.grads["W_f"], rtol=1e-13)  # the forward state's alike


@pytest.mark.parametrize("truncate", MODES, **IDS)
def test_torchs_model_truncates_as_loss_and_grads(truncate):
    """torch's Model(truncate=, rng=) of birnn on a padded batch: its loss and every gradient (parameters, initial
    states) equal loss_and_grads' in that truncation with the same lengths (random: the same seed), to 1e-12."""
    model, module = model_of("birnn"), module_of("birnn", "torch")
    lengths = torch.tensor([2, T, 1, 5])
    params, xs, ys, initial = values(model, 18, steps=T, batch=len(lengths))

    def rng():
        return torch.Generator().manual_seed(RANDOM_SEED) if truncate[0] == "random" else None

    net = module.Model(d=2, h=3, q=4, dtype=torch.float64, truncate=truncate, rng=rng())
    with torch.no_grad():
        for name, value in params.items():
            getattr(net, name).copy_(torch.tensor(value))
    leaves = {f"{seq.name}0": torch.tensor(initial[seq.name], requires_grad=True) for seq in model.states}
    outputs = net(torch.tensor(xs), **leaves, lengths=lengths)
    total = net.loss(outputs, torch.tensor(ys), lengths=lengths)
    total.backward()
    tensors = {name: torch.tensor(value) for name, value in params.items()}
    states = {key: leaf.detach() for key, leaf in leaves.items()}
    loss, grads = module.loss_and_grads(
        tensors, torch.tensor(xs), torch.tensor(ys), **states, truncate=truncate, rng=rng(), lengths=lengths
    )
    assert abs(float(total.detach()) - float(loss)) <= 1e-12 * max(1.0, abs(float(loss)))
    found = {name: getattr(net, name).grad for name in module.PARAMS} | {k: v.grad for k, v in leaves.items()}
    for key, value in grads.items():
        error = (found[key] - value).abs().max() / max(1.0, float(value.abs().max()))
        assert error <= 1e-12, f"gradient {key} differs by {float(error):.2e}"
    _, full = module.loss_and_grads(tensors, torch.tensor(xs), torch.tensor(ys), **states, lengths=lengths)
    assert any(not torch.allclose(full[key], value) for key, value in grads.items())
