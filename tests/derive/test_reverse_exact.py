"""Layer 1 of the proof for reverse-time states: the derivation of bidirectional cells against the
brute force of brute_force.py (the model unrolled sweep by sweep, each recorded scalar of the unrolled
loss differentiated by sympy.diff, in exact rationals or at 60 digits: test_exact.py shows it is sympy.diff
of the whole loss), at
d=2, h=3, q=4 and T=3. With the identity for activation and a squared error every value is rational,
and every derived gradient entry equals brute force exactly; the tanh taggers with softmax
cross-entropy agree to 30 digits."""

import pytest

from bptt.derive.bptt import derive
from bptt.derive.directional import directional_forms
from bptt.derive.explicit import backward, evaluate
from bptt.derive.nodes import Adj, identity, t
from bptt.examples.birnn import bidirectional, birnn, two_layers
from bptt.tests.derive.test_exact import (
    NAMED,
    STEPS,
    agree_to_30_digits,
    disagreements,
    exactly_equal,
    forward_values,
    report,
)
from bptt.tests.support.brute_force import DIGITS, recorded_gradients
from bptt.tests.support.problems import make_problem


def linear_cell(layers):
    return bidirectional(f"bilinear{layers}", "linear", layers=layers, activation=identity, tagger=False)


@pytest.fixture(scope="module")
def one_layer_linear():
    case = make_problem(linear_cell(1), STEPS, seed=5)
    return case, recorded_gradients(case, digits=None)


@pytest.fixture(scope="module")
def two_layer_linear():
    case = make_problem(linear_cell(2), STEPS, seed=6)
    return case, recorded_gradients(case, digits=None)


@pytest.mark.parametrize("named", NAMED)
def test_bidirectional_linear_is_exact(one_layer_linear, named):
    """The forward state's adjoint runs back from T, the reverse state's forward from 1; with h_b's initial
    value at T+1, every gradient (h_f0 at 0, h_b0 at T+1) equals sympy.diff of the loss exactly."""
    case, brute = one_layer_linear
    derived = backward(derive(case.model, named=named, loss=case.model.concrete_loss()), STEPS, forward_values(case))
    bad = disagreements(derived, brute, case, exactly_equal)
    assert not bad, report(bad)


@pytest.mark.parametrize("named", NAMED)
def test_two_layer_bidirectional_linear_is_exact(two_layer_linear, named):
    """Layer 2's directions each read both of layer 1's at t: the adjoints of both directions of layer 2
    meet in layer 1's, exactly as brute force has it."""
    case, brute = two_layer_linear
    derived = backward(derive(case.model, named=named), STEPS, forward_values(case))
    bad = disagreements(derived, brute, case, exactly_equal)
    assert not bad, report(bad)


def test_the_bidirectional_tagger_agrees_to_30_digits():
    """tanh, softmax and cross-entropy (two layers: exact above with the identity, and to 30 digits through
    the closed forms below)."""
    case = make_problem(birnn(), STEPS, seed=7)
    brute = recorded_gradients(case)
    env = forward_values(case, DIGITS)
    for named in NAMED:
        derived = backward(derive(case.model, named=named), STEPS, dict(env))
        bad = disagreements(derived, brute, case, agree_to_30_digits)
        assert not bad, f"named={named!r}: " + report(bad)


@pytest.mark.parametrize("layers", [1, 2])
def test_each_directions_closed_form_is_its_recursion_exactly(one_layer_linear, two_layer_linear, layers):
    """dL/dh_f,t = sum_{j>=t} (A_{t+1} ... A_j) b_j and dL/dh_b,t = sum_{j<=t} (A_{t-1} ... A_j) b_j, evaluated
    at every step, equal the adjoints the recursions computed, exactly (and so brute force's)."""
    case, _ = one_layer_linear if layers == 1 else two_layer_linear
    derivation = derive(case.model, loss=case.model.concrete_loss())
    env = forward_values(case)
    backward(derivation, STEPS, env)
    forms = directional_forms(derivation)
    assert [form.reverse for form in forms.values()] == [False, True] * layers
    for seq, form in forms.items():
        for step in range(1, STEPS + 1):
            assert evaluate(form.expr.subs(t, step), env, STEPS) == env[Adj(seq(step))], (seq.name, step)


def test_the_reverse_closed_form_orders_its_jacobians_latest_first():
    """With tanh the Jacobians differ from step to step, so their order shows: A_{t-1} ... A_j, at 30 digits."""
    case = make_problem(two_layers(), STEPS + 1, seed=8)
    derivation = derive(case.model)
    env = forward_values(case, DIGITS)
    backward(derivation, case.steps, env)
    for seq, form in directional_forms(derivation).items():
        for step in range(1, case.steps + 1):
            closed, recursive = evaluate(form.expr.subs(t, step), env, case.steps), env[Adj(seq(step))]
            assert all(agree_to_30_digits(a, b) for a, b in zip(closed, recursive, strict=True)), (seq.name, step)
