"""Layer 1 of the proof: the derived BPTT formulas against sympy.diff of the
unrolled loss, at tiny concrete sizes (d=2, h=3, q=4) and T=3.

The brute-force side (brute_force.py) knows nothing of derive.bptt: it runs the model
forward with a symbol in every entry of every parameter and initial state, and
differentiates the scalar loss with respect to each symbol: sympy.diff of the whole
expression for linear; for the other cells, whose whole expression takes seconds to
minutes, the chain rule over the recorded unrolled computation, each step's scalar
expressions differentiated by sympy.diff (test_the_recorded_chain_rule_is_sympy_diff shows
that the two agree, on linear and on elman). The derived side evaluates the formulas of
derive.bptt on the same values with derive.explicit.backward, for each of the three ways of
naming adjoints.
"""

import dataclasses

import mpmath
import pytest
import sympy as sp

from bptt.derive.bptt import NEXT, derive
from bptt.derive.explicit import backward, unroll
from bptt.derive.nodes import Adj, LossGrad, t
from bptt.tests.support.brute_force import DIGITS, exact_gradients, numeric_gradients, recorded_gradients
from bptt.tests.support.problems import make_problem

STEPS = 3
AGREE = mpmath.mpf(10) ** -30  # required relative (or, near zero, absolute) agreement
NAMED = ("none", "all", "textbook")
GATED = ("lstm", "lstm-peephole", "gru")


def exactly_equal(derived, brute):
    return derived.is_Rational and derived == brute


def agree_to_30_digits(derived, brute):
    with mpmath.workdps(DIGITS):
        return abs(mpmath.mpf(derived) - brute) <= AGREE * max(1, abs(brute))


def disagreements(derived, brute, problem, equal):
    """One message per entry where a derived gradient differs from brute force."""
    if set(derived) != set(problem.entries):
        return [f"derived gradients for {sorted(derived)}, expected {sorted(problem.entries)}"]
    out = []
    for name, symbols in problem.entries.items():
        value = derived[name]
        if value.shape != symbols.shape:
            out.append(f"{name}: derived shape {value.shape}, expected {symbols.shape}")
            continue
        for i in range(symbols.rows):
            for j in range(symbols.cols):
                if not equal(value[i, j], brute[symbols[i, j]]):
                    out.append(f"{name}[{i},{j}]: derived {value[i, j]} != sympy.diff {brute[symbols[i, j]]}")
    return out


def report(bad):
    return f"{len(bad)} gradient entries disagree with sympy.diff of the unrolled loss:\n" + "\n".join(bad)


@pytest.fixture(scope="module")
def linear():
    case = make_problem("linear", STEPS, seed=0)
    return case, exact_gradients(case)


@pytest.fixture(scope="module")
def elman():
    case = make_problem("elman", STEPS, seed=1)
    return case, recorded_gradients(case)


@pytest.fixture(scope="module", params=GATED)
def gated(request):
    case = make_problem(request.param, STEPS, seed=3)
    return case, recorded_gradients(case)


def forward_values(case, digits=None):
    """Values at the point (digits-digit Floats if given), with the forward pass filled in."""
    env = case.values_env(digits)
    unroll(case.model, case.steps, env)
    return env


def assert_every_derivation_agrees(case, brute, env, equal=agree_to_30_digits):
    """The derivation with no, all and the textbook's named adjoints, each against brute force."""
    for named in NAMED:
        derived = backward(derive(case.model, named=named), case.steps, dict(env))
        bad = disagreements(derived, brute, case, equal)
        assert not bad, f"named={named!r}: " + report(bad)


def squared_error_gradients(derivation, env, steps):
    """Put into env, for each LossGrad node at t = 1..steps, the gradient of
    1/2 ||o - y||^2 at the unrolled o_t, obtained by sympy.diff."""
    for value in derivation.output_adjoints.values():
        for node in value.atoms(LossGrad):
            for k in range(1, steps + 1):
                at = node.subs(t, k)
                o, y = env[at.loss.prediction], env[at.loss.target]
                z = sp.symbols(f"z:{o.rows}")
                loss = sum((z[n] - y[n]) ** 2 for n in range(o.rows)) / 2
                env[at] = sp.ImmutableMatrix([sp.diff(loss, zn) for zn in z]).xreplace(dict(zip(z, o, strict=True)))


@pytest.mark.parametrize("named", NAMED)
def test_linear_squared_error_is_exact(linear, named):
    """With l = 1/2||o - y||^2, every derived entry equals sympy.diff exactly."""
    case, brute = linear
    derivation = derive(case.model, named=named, loss=case.model.concrete_loss())
    derived = backward(derivation, case.steps, forward_values(case))
    bad = disagreements(derived, brute, case, exactly_equal)
    assert not bad, report(bad)


@pytest.mark.parametrize("named", NAMED)
def test_linear_generic_loss_is_exact(linear, named):
    """d2l's derivation for an unspecified l(o_t, y_t), with dl/do_t supplied for
    the squared error, equals sympy.diff exactly."""
    case, brute = linear
    derivation = derive(case.model, named=named)
    nodes = [n for value in derivation.output_adjoints.values() for n in value.atoms(LossGrad)]
    assert nodes, "the generic-loss derivation should keep dl/do_t unevaluated"
    env = forward_values(case)
    squared_error_gradients(derivation, env, case.steps)
    derived = backward(derivation, case.steps, env)
    bad = disagreements(derived, brute, case, exactly_equal)
    assert not bad, report(bad)


@pytest.mark.parametrize("named", NAMED)
def test_elman_agrees_to_30_digits(elman, named):
    """tanh, softmax and cross-entropy: agreement to 30 significant digits at 60-digit precision."""
    case, brute = elman
    labels = [v for k, v in case.symbolic_env.items() if getattr(k, "role", None) == "label"]
    assert len(labels) == case.steps and all(v.is_Integer for v in labels)
    derived = backward(derive(case.model, named=named), case.steps, forward_values(case, DIGITS))
    bad = disagreements(derived, brute, case, agree_to_30_digits)
    assert not bad, report(bad)


def test_the_recorded_chain_rule_is_sympy_diff(linear):
    """The brute force of the other cells, the chain rule over the recorded unrolled computation,
    gives what sympy.diff of the whole unrolled loss gives: the very same rationals on
    linear, and on elman (tanh, softmax, cross-entropy; T=2, where the whole expression is
    differentiated in half the time of T=3) the same value to 50 digits."""
    case, brute = linear
    recorded = recorded_gradients(case, digits=None)
    assert recorded == brute and any(recorded.values())
    case = make_problem("elman", 2, seed=1)
    brute, recorded = numeric_gradients(case), recorded_gradients(case)
    with mpmath.workdps(DIGITS):
        errors = [abs(mpmath.mpf(recorded[x]) - brute[x]) / max(1, abs(brute[x])) for x in case.symbols]
        assert max(errors) <= mpmath.mpf(10) ** -50, max(errors)
    assert all(recorded[x] != 0 for x in case.symbols)


def test_gated_cells_agree_to_30_digits(gated):
    """torch.nn.LSTM, Greff et al.'s peephole LSTM and torch.nn.GRU (sigmoid gates,
    Hadamard products, two states for the LSTMs) at d=2, h=3, q=4, T=3: every
    derivation agrees to 30 digits with the chain rule over the unrolled loss."""
    case, brute = gated
    assert_every_derivation_agrees(case, brute, forward_values(case, DIGITS))


def without_next_step(derivation):
    """A wrong derivation: the state recursion loses its term from step t+1."""
    states = {seq: [c for c in cs if c.when != NEXT] for seq, cs in derivation.states.items()}
    return dataclasses.replace(derivation, states=states)


def reads_state_adjoint(expr):
    return any(a.of.role == "state" for a in expr.atoms(Adj))


def assert_dropped_term_is_caught(case, brute, derivation, env, equal):
    """Dropping the state recursion's terms from step t+1 is caught in the initial states
    and in every parameter gradient that reads a state's adjoint, and only there."""
    wrong = backward(without_next_step(derivation), case.steps, env)
    bad = disagreements(wrong, brute, case, equal)
    caught = {message.split("[")[0] for message in bad}
    expected = {f"{s.name}0" for s in case.model.states}
    expected |= {p.name for p in case.model.params if reads_state_adjoint(derivation.param_gradient(p))}
    assert caught == expected, report(bad)
    assert set(case.entries) - expected, "some gradients should be untouched by the dropped term"


@pytest.mark.parametrize("name", ["linear", "elman"])
def test_negative_control_detects_a_dropped_term(name, linear, elman):
    """The comparison is not vacuous: dropping dL/dh_{t+1} from the recursion is
    caught in h0 and in every parameter gradient that reads dL/dh_t, and only there."""
    case, brute = linear if name == "linear" else elman
    if name == "linear":
        derivation = derive(case.model, loss=case.model.concrete_loss())
        assert_dropped_term_is_caught(case, brute, derivation, forward_values(case), exactly_equal)
    else:
        assert_dropped_term_is_caught(case, brute, derive(case.model), forward_values(case, DIGITS), agree_to_30_digits)


def test_negative_control_for_the_gated_cells(gated):
    """Dropping dL/dh_{t+1} and dL/dc_{t+1} from the recursions is caught in h0 (and c0)
    and in every gate's parameters; V, which reads only dL/ds_t, stays right."""
    case, brute = gated
    assert_dropped_term_is_caught(case, brute, derive(case.model), forward_values(case, DIGITS), agree_to_30_digits)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["elman-jordan", "elman-onehot", "jordan"])
def test_seed_models_agree_to_30_digits(name):
    """One-hot word inputs (a column lookup) and teacher forcing (onehot(y_{t-1}) read
    in place of o_{t-1}): the unrolled loss is differentiated as it is, with the
    teacher-forced values as data, and the derivation agrees to 30 digits."""
    case = make_problem(name, STEPS, seed=2)
    assert_every_derivation_agrees(case, recorded_gradients(case), forward_values(case, DIGITS))
