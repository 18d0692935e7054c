"""Layer 1 of the proof: the derived BPTT formulas against sympy.diff of the
unrolled loss, at tiny concrete sizes (d=2, h=3, q=4) and T=3.

The brute-force side knows nothing of derive.bptt: it runs the model forward
with a symbol in every entry of every parameter and of h_0, and differentiates
the scalar loss with respect to each symbol. The derived side evaluates the
formulas of derive.bptt on the same values with derive.explicit.backward.
"""

import dataclasses

import mpmath
import pytest
import sympy as sp

from bptt.derive.bptt import NEXT, derive
from bptt.derive.explicit import backward, unroll
from bptt.derive.nodes import Adj, LossGrad, t

STEPS = 3
DIGITS = 60  # working precision of the elman comparison
AGREE = mpmath.mpf(10) ** -30  # required relative (or, near zero, absolute) agreement


def exact_gradients(problem):
    """{entry symbol: dL/d symbol} at the point, by sympy.diff, in exact rationals."""
    loss = unroll(problem.model, problem.steps, dict(problem.symbolic_env))
    return {x: sp.diff(loss, x).xreplace(problem.point) for x in problem.symbols}


def numeric_gradients(problem):
    """{entry symbol: dL/d symbol} at the point, by sympy.diff, in DIGITS-digit mpmath."""
    loss = unroll(problem.model, problem.steps, dict(problem.symbolic_env))
    symbols = problem.symbols
    gradient = sp.lambdify(symbols, [sp.diff(loss, x) for x in symbols], "mpmath", cse=True)
    with mpmath.workdps(DIGITS):
        values = gradient(*(mpmath.mpf(problem.point[x].p) / problem.point[x].q for x in symbols))
    return dict(zip(symbols, values, strict=True))


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
def linear(concrete_problem):
    case = concrete_problem("linear", STEPS, seed=0)
    return case, exact_gradients(case)


@pytest.fixture(scope="module")
def elman(concrete_problem):
    case = concrete_problem("elman", STEPS, seed=1)
    return case, numeric_gradients(case)


def linear_values(case):
    """Values at the point, with the forward pass (o_t, h_t) filled in."""
    env = case.values_env()
    unroll(case.model, case.steps, env)
    return env


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


@pytest.mark.parametrize("named", ["none", "all", "textbook"])
def test_linear_squared_error_is_exact(linear, named):
    """With l = 1/2||o - y||^2, every derived entry equals sympy.diff exactly."""
    case, brute = linear
    derivation = derive(case.model, named=named, loss=case.model.concrete_loss())
    derived = backward(derivation, case.steps, linear_values(case))
    bad = disagreements(derived, brute, case, exactly_equal)
    assert not bad, report(bad)


@pytest.mark.parametrize("named", ["none", "all", "textbook"])
def test_linear_generic_loss_is_exact(linear, named):
    """d2l's derivation for an unspecified l(o_t, y_t), with dl/do_t supplied for
    the squared error, equals sympy.diff exactly."""
    case, brute = linear
    derivation = derive(case.model, named=named)
    nodes = [n for value in derivation.output_adjoints.values() for n in value.atoms(LossGrad)]
    assert nodes, "the generic-loss derivation should keep dl/do_t unevaluated"
    env = linear_values(case)
    squared_error_gradients(derivation, env, case.steps)
    derived = backward(derivation, case.steps, env)
    bad = disagreements(derived, brute, case, exactly_equal)
    assert not bad, report(bad)


@pytest.mark.parametrize("named", ["none", "all", "textbook"])
def test_elman_agrees_to_30_digits(elman, named):
    """tanh, softmax and cross-entropy: agreement to 30 significant digits at 60-digit precision."""
    case, brute = elman
    labels = [v for k, v in case.symbolic_env.items() if getattr(k, "role", None) == "label"]
    assert len(labels) == case.steps and all(v.is_Integer for v in labels)
    env = case.values_env(DIGITS)
    unroll(case.model, case.steps, env)
    derived = backward(derive(case.model, named=named), case.steps, env)
    bad = disagreements(derived, brute, case, agree_to_30_digits)
    assert not bad, report(bad)


def without_next_step(derivation):
    """A wrong derivation: the state recursion loses its term from step t+1."""
    states = {seq: [c for c in cs if c.when != NEXT] for seq, cs in derivation.states.items()}
    return dataclasses.replace(derivation, states=states)


def reads_state_adjoint(expr):
    return any(a.of.role == "state" for a in expr.atoms(Adj))


@pytest.mark.parametrize("name", ["linear", "elman"])
def test_negative_control_detects_a_dropped_term(name, linear, elman):
    """The comparison is not vacuous: dropping dL/dh_{t+1} from the recursion is
    caught in h0 and in every parameter gradient that reads dL/dh_t, and only there."""
    case, brute = linear if name == "linear" else elman
    if name == "linear":
        derivation = derive(case.model, loss=case.model.concrete_loss())
        env, equal = linear_values(case), exactly_equal
    else:
        derivation = derive(case.model)
        env, equal = case.values_env(DIGITS), agree_to_30_digits
        unroll(case.model, case.steps, env)
    wrong = backward(without_next_step(derivation), case.steps, env)
    bad = disagreements(wrong, brute, case, equal)
    caught = {message.split("[")[0] for message in bad}
    expected = {f"{s.name}0" for s in case.model.states}
    expected |= {p.name for p in case.model.params if reads_state_adjoint(derivation.param_gradient(p))}
    assert caught == expected, report(bad)
    assert set(case.entries) - expected, "some gradients should be untouched by the dropped term"


@pytest.mark.parametrize("name", ["elman-onehot", "jordan", "elman-jordan"])
def test_seed_models_agree_to_30_digits(name, concrete_problem):
    """One-hot word inputs (a column lookup) and teacher forcing (onehot(y_{t-1}) read
    in place of o_{t-1}): the unrolled loss is differentiated as it is, with the
    teacher-forced values as data, and the derivation agrees to 30 digits."""
    case = concrete_problem(name, STEPS, seed=2)
    brute = numeric_gradients(case)
    env = case.values_env(DIGITS)
    unroll(case.model, case.steps, env)
    for named in ("none", "all", "textbook"):
        derived = backward(derive(case.model, named=named), case.steps, env)
        bad = disagreements(derived, brute, case, agree_to_30_digits)
        assert not bad, report(bad)
