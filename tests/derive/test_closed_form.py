"""Layer 2 of the proof: the closed form of dL/dh_t solves the recursion it was
derived from, symbolically where possible and numerically always."""

import dataclasses

import mpmath
import pytest
import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.closed_form import closed_form, recursion_residual
from bptt.derive.explicit import backward, evaluate, expand_over_time, unroll
from bptt.derive.models import load
from bptt.derive.nodes import Adj, T, TimeSum, t
from bptt.documents.latex import latex

STEPS = 4
DIGITS = 60


def state_form(name, **options):
    model = load(name)
    derivation = derive(model, **options)
    return derivation, closed_form(derivation, model.states[0])


@pytest.mark.parametrize("name", ["linear", "elman"])
def test_recursion_residual_is_structurally_zero(name):
    """Terminal term, peeled j = t term and prepended A_{t+1}: each pair is equal as SymPy objects."""
    _, form = state_form(name)
    pairs = recursion_residual(form)
    assert pairs
    for n, (lhs, rhs) in enumerate(pairs):
        assert lhs == rhs, f"{name}: residual pair {n} differs:\n  {lhs}\n  {rhs}"


@pytest.mark.parametrize("name", ["linear", "elman"])
def test_recursion_residual_rejects_a_wrong_form(name):
    """Negative control: an extra factor A in every term breaks the terminal pair."""
    _, form = state_form(name)
    wrong = dataclasses.replace(form, expr=TimeSum(form.jacobian * form.expr.body, *form.expr.args[1:]))
    assert not all(lhs == rhs for lhs, rhs in recursion_residual(wrong))


def expanded(expr):
    """Sums and powers over time written out, as a noncommutative matrix polynomial."""
    return sp.expand(expand_over_time(expr.subs(T, STEPS)).doit())


def unrolled_by_hand(derivation, seq):
    """dL/dh_k for k = T..1 from the terminal value and the recursion, Adj(h_{k+1}) substituted."""
    adjoint = {STEPS: derivation.terminal(seq).subs(T, STEPS)}
    for k in range(STEPS - 1, 0, -1):
        adjoint[k] = derivation.recursion(seq).subs(t, k).xreplace({Adj(seq(k + 1)): adjoint[k + 1]})
    return {k: sp.expand(value.doit()) for k, value in adjoint.items()}


def test_linear_closed_form_equals_unrolled_recursion_symbolically():
    """With MatrixSymbols and T = 4, sum_j (W_hh^T)^{j-t} W_qh^T dL/do_j is, for each
    t = 1..4, the same matrix polynomial as the recursion unrolled by hand; so is d2l's reindexed form."""
    derivation, form = state_form("linear")
    seq = form.seq
    by_hand = unrolled_by_hand(derivation, seq)
    for k in range(1, STEPS + 1):
        assert expanded(form.expr.subs(t, k)) == by_hand[k], f"closed form differs at t={k}"
        assert expanded(form.reindexed().subs(t, k)) == by_hand[k], f"reindexed form differs at t={k}"
    # the comparison distinguishes neighbouring steps, so it is not vacuous
    assert expanded(form.expr.subs(t, 1)) != by_hand[2]


def exactly_equal(a, b):
    return a.is_Rational and a == b


def agree_to_40_digits(a, b):
    with mpmath.workdps(DIGITS):
        a, b = mpmath.mpf(a), mpmath.mpf(b)
        return abs(a - b) <= mpmath.mpf(10) ** -40 * max(1, abs(b))


@pytest.mark.parametrize("name", ["linear", "elman"])
def test_closed_form_equals_backward_numerically(name, concrete_problem):
    """At T = 4 the closed form, evaluated from dL/do_j (dL/ds_j) and the forward states,
    equals the dL/dh_t that backward() computed by the recursion: exactly for linear
    (rationals), to 40 digits for elman."""
    case = concrete_problem(name, STEPS, seed=2)
    model = case.model
    if name == "linear":
        derivation = derive(model, loss=model.concrete_loss())
        env, equal = case.values_env(), exactly_equal
    else:
        derivation = derive(model)
        env, equal = case.values_env(DIGITS), agree_to_40_digits
    unroll(model, STEPS, env)
    backward(derivation, STEPS, env)
    form = closed_form(derivation, model.states[0])
    for k in range(1, STEPS + 1):
        closed = evaluate(form.expr.subs(t, k), env, STEPS)
        recursive = env[Adj(form.seq(k))]
        assert closed.shape == recursive.shape
        for n, (a, b) in enumerate(zip(closed, recursive, strict=True)):
            assert equal(a, b), f"{name}: dL/dh_{k}[{n}]: closed form {a} != recursion {b}"


def test_linear_reindexed_form_is_d2l():
    """d2l (seed 000): dL/dh_t = sum_{i=t}^T (W_hh^T)^{T-i} W_qh^T dL/do_{T+t-i}."""
    _, form = state_form("linear")
    assert latex(form.reindexed()) == (
        r"\sum_{i=t}^{T} \left(\mathbf{W}_\textrm{hh}^\top\right)^{T-i} "
        r"\mathbf{W}_\textrm{qh}^\top \frac{\partial L}{\partial \mathbf{o}_{T+t-i}}"
    )
    assert form.is_power


def test_elman_closed_form_is_an_ordered_product():
    """For elman A_k = W^T diag(1 - h_k^2) depends on k: the closed form keeps an ordered product."""
    _, form = state_form("elman")
    assert not form.is_power
