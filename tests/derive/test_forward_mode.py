"""Forward mode (real-time recurrent learning) and the recurrence lemma it rests on."""

import numpy as np
import pytest
import sympy as sp

from bptt.derive.explicit import expand_over_time, explicit
from bptt.derive.lemma import lemma, lemma_induction
from bptt.derive.models import load
from bptt.derive.nodes import DescendingTimeProduct, TimeProduct, t
from bptt.derive.rtrl import forward_mode, live_states
from bptt.tests.support.modules import module_of
from bptt.tests.support.zoo import supporting


@pytest.mark.parametrize("name", supporting("forward_mode_grads"))
@pytest.mark.parametrize("steps, batch, seed, first_size", [(1, 2, 0, 2), (6, 3, 1, 3), (9, 1, 2, 4)])
def test_forward_mode_equals_bptt(name, steps, batch, seed, first_size):
    """forward_mode_grads returns the loss and every gradient of loss_and_grads, to 1e-12."""
    module = module_of(name)
    rng = np.random.default_rng(seed)
    sizes = {size: first_size + i for i, size in enumerate(module.SIZES)}
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, **sizes)
    initial = {key: rng.standard_normal((batch, sizes[size])) for key, size in module.STATES.items()}
    loss, grads = module.loss_and_grads(params, xs, ys, **initial)
    forward_loss, forward_grads = module.forward_mode_grads(params, xs, ys, **initial)
    assert forward_loss == pytest.approx(loss, rel=1e-12)
    assert list(forward_grads) == list(grads)
    for key in grads:
        scale = max(np.abs(grads[key]).max(), 1e-300)
        error = np.abs(forward_grads[key] - grads[key]).max() / scale
        assert error <= 1e-12, f"{name} {key}: forward mode {forward_grads[key]} vs BPTT {grads[key]}"


def test_forward_mode_float32_stays_float32():
    module = module_of("elman")
    rng = np.random.default_rng(0)
    params = {k: v.astype(np.float32) for k, v in module.init_params(rng, d=2, h=3, q=4).items()}
    xs, ys = module.random_inputs(rng, 4, 2, np.float32, d=2, h=3, q=4)
    _, grads = module.forward_mode_grads(params, xs, ys)
    assert all(g.dtype == np.float32 for g in grads.values())


def test_lemma_is_proved_by_induction():
    """Each fact of the induction holds structurally, and the facts are not trivially equal."""
    _, b, c, solution = lemma()
    facts = lemma_induction(solution, b, c)
    assert len(facts) == 4
    for left, right in facts:
        assert left == right, f"{left} != {right}"
    assert facts[1][0] != facts[2][0]


def unrolled_and_closed(solution, b_seq, c_seq, steps, seed):
    """The recursion a_t = b_t + c_t a_{t-1} unrolled, and the given solution, at t = 1..steps,
    for random integer non-commuting 3 x 3 matrices."""
    rng = np.random.default_rng(seed)
    values = {b_seq.subs(t, k): sp.ImmutableMatrix(rng.integers(-3, 4, (3, 1))) for k in range(1, steps + 1)}
    values.update({c_seq.subs(t, k): sp.ImmutableMatrix(rng.integers(-3, 4, (3, 3))) for k in range(1, steps + 1)})
    a, pairs = sp.zeros(3, 1), []
    for k in range(1, steps + 1):
        a = values[b_seq.subs(t, k)] + values[c_seq.subs(t, k)] * a
        pairs.append((a, explicit(expand_over_time(solution.subs(t, k)).xreplace(values))))
    return pairs


def test_lemma_solves_the_recursion_at_concrete_steps():
    """The lemma's sum equals the unrolled recursion for t = 1..6, exactly."""
    _, b_seq, c_seq, solution = lemma(n=sp.Integer(3))
    for k, (unrolled, closed) in enumerate(unrolled_and_closed(solution, b_seq, c_seq, 6, seed=0), start=1):
        assert closed == unrolled, f"t = {k}"


def test_lemma_check_can_fail():
    """Control: with the product in the wrong order (oldest factor on the left) the check fails."""
    _, b_seq, c_seq, solution = lemma(n=sp.Integer(3))
    wrong = solution.replace(
        lambda e: isinstance(e, DescendingTimeProduct), lambda e: TimeProduct(e.body, e.index, e.start, e.end)
    )
    pairs = unrolled_and_closed(wrong, b_seq, c_seq, 4, seed=0)
    assert any(closed != unrolled for unrolled, closed in pairs)


@pytest.mark.parametrize("name", ["linear", "elman", "elman-onehot"])
def test_jacobian_is_the_transposed_backward_one(name):
    """c_t of the forward tangents is A_t^T of the backward recursion (same cell, two directions)."""
    from bptt.derive.bptt import derive
    from bptt.derive.closed_form import closed_form, k

    model = load(name)
    (seq,) = live_states(model)
    forward = forward_mode(model, model.params[0]).jacobian(seq)
    backward = closed_form(derive(model), seq).jacobian.subs(k, t)
    assert sp.simplify((forward - backward.T).doit()) == sp.ZeroMatrix(*forward.shape)
