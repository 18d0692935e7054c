"""The answers of an exercise: the derivation's formulas, with the instance's numbers substituted, step by step."""

import functools
from dataclasses import dataclass

import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.closed_form import NoClosedForm
from bptt.derive.explicit import evaluate
from bptt.derive.flow import gradient_flow
from bptt.derive.nodes import Adj, T, t
from bptt.derive.order import term_order
from bptt.derive.truncation import Kept, chunked, tau
from bptt.documents.exercises.instance import attempts


@dataclass(frozen=True)
class Worked:
    """One answer: lhs = formula = the sum of the terms' values = value."""

    lhs: object  # the SymPy node answered (an adjoint at a step, a parameter's gradient)
    formula: object  # the formula at this step (t substituted), or the sum over steps
    terms: tuple  # ((term, value), ...): each term of the formula and its value
    value: object  # an explicit matrix

    @property
    def shown_terms(self):
        return self.terms if len(self.terms) > 1 else ()


@dataclass(frozen=True)
class Answers:
    outputs: tuple  # Worked dL/do_k for k = 1..T
    backward: tuple  # Worked state (and named intermediate) adjoints, from step T down, then the initial states
    gradients: tuple  # Worked parameter gradients of the asked parameters
    truncated: tuple  # Worked state adjoints under chunks of tau steps
    truncated_gradients: tuple
    gate: object  # the gate whose adjoint is asked (an intermediate Seq), or None
    gate_steps: tuple  # Worked adjoints of the gate at steps 1..T
    asked: tuple  # the parameters whose gradients are asked
    derivation: object
    flow: object


ATTEMPTS = 20  # instances tried for a seed before its last is kept, degenerate or not


@functools.lru_cache(maxsize=16)  # both sheets, in both formats, and the tests read the same exercise
def exercise(model, seed):
    """(instance, answers) of a seed: its first instance whose asked gradients are not zero."""
    for _, found in zip(range(ATTEMPTS), attempts(model, seed), strict=False):
        worked = answers(found)
        if all(any(worked_one.value) for worked_one in worked.gradients + worked.truncated_gradients):
            break
    return found, worked


def answers(found):
    """The worked answers of an instance (whose forward pass has run)."""
    model = found.model
    derivation = derive(model, "textbook", loss=model.concrete_loss())
    try:
        flow = gradient_flow(model)
    except NoClosedForm:
        flow = None
    asked = asked_params(model, flow)
    env = dict(found.env)
    outputs = tuple(_outputs(derivation, found, env))
    backward = tuple(_backward(derivation, found, env, derivation.recursion))
    gradients = tuple(_gradient(derivation, found, env, p) for p in asked)
    cut = dict(env)
    truncated = tuple(_backward(derivation, found, cut, lambda seq: chunked(derivation, seq), found.tau))
    truncated_gradients = tuple(_gradient(derivation, found, cut, p) for p in asked[:1])
    gate, gate_steps = _gate(derivation, found, env)
    return Answers(
        outputs, backward, gradients, truncated, truncated_gradients, gate, gate_steps, asked, derivation, flow
    )


def _gate(derivation, found, env):
    """One gate and its adjoints at steps 1..T: a named adjoint of the textbook derivation (the middle one), else
    the first intermediate a sigmoid computes, its adjoint from the derivation that names every intermediate."""
    model = derivation.model
    order = [seq for seq, _ in model.steps]
    named = sorted(derivation.named, key=order.index)
    if named:
        gate = named[len(named) // 2]
        return gate, tuple(
            _worked(Adj(gate(k)), derivation.intermediate(gate).subs(t, k), found, env)
            for k in range(1, found.steps + 1)
        )
    gates = [
        seq for seq, rhs in model.steps if seq.role == "intermediate" and getattr(rhs, "function", "") == "sigmoid"
    ]
    if not gates:
        return None, ()
    every = derive(model, "all", loss=model.concrete_loss())
    steps, later = [], [seq for seq in reversed(model.intermediates)]
    for k in range(found.steps, 0, -1):
        for seq in later[: later.index(gates[0]) + 1]:
            worked = _worked(Adj(seq(k)), every.intermediate(seq).subs(t, k), found, env)
            env[Adj(seq(k))] = worked.value
            steps += [worked] if seq == gates[0] else []
    return gates[0], tuple(reversed(steps))


def asked_params(model, flow):
    """The recurrent weight (or the first parameter when nothing recurs) and the first other weight."""
    first = flow.recurrent[0] if flow is not None and flow.recurrent else model.params[0]
    return (first, next(p for p in model.params if p != first))


def _value(formula, found, env):
    return evaluate(formula, env, found.steps)


def _worked(lhs, formula, found, env):
    terms = sorted(formula.args, key=term_order) if isinstance(formula, sp.MatAdd) else (formula,)
    shown = tuple((term, _value(term, found, env)) for term in terms)
    return Worked(lhs, formula, shown, _value(formula, found, env))


def _outputs(derivation, found, env):
    for seq, value in derivation.output_adjoints.items():
        for k in range(1, found.steps + 1):
            worked = _worked(Adj(seq(k)), value.subs(t, k), found, env)
            env[Adj(seq(k))] = worked.value
            yield worked


def _at(formula, k, chunk):
    """The formula at step k; under chunks of `chunk` steps, Kept(k, tau) made 0 or 1."""
    formula = formula.subs(t, k)
    if chunk is not None:
        formula = formula.subs(tau, chunk).replace(
            lambda e: isinstance(e, Kept), lambda e: sp.S.Zero if int(e.args[0]) % chunk == 0 else sp.S.One
        )
        formula = formula.doit(deep=False) if isinstance(formula, sp.MatAdd) else formula
    return formula


def _backward(derivation, found, env, recursion, chunk=None):
    """The state adjoints from step T down to step 1 (each step's in the reverse order of its equations, the
    named intermediates among them), then the initial states'. Under chunks the recursion is the chunked one."""
    model, steps = derivation.model, found.steps
    order = [seq for seq, _ in reversed(model.steps) if seq not in model.forced]
    for k in range(steps, 0, -1):
        for seq in order:
            if seq.role == "state":
                formula = derivation.terminal(seq).subs(T, steps) if k == steps else _at(recursion(seq), k, chunk)
            elif seq in derivation.named:
                formula = derivation.intermediate(seq).subs(t, k)
            else:
                continue
            worked = _worked(Adj(seq(k)), formula, found, env)
            env[Adj(seq(k))] = worked.value
            yield worked
    for seq in model.states:
        yield _worked(Adj(seq(0)), derivation.initial(seq), found, env)


def _gradient(derivation, found, env, param):
    """dL/dtheta as the sum over steps of the per-step terms, each term's value shown."""
    total = derivation.param_gradient(param)
    body = getattr(total, "body", None)
    if body is None:  # a zero gradient
        return Worked(param, total, (), _value(total, found, env))
    terms = tuple((body.subs(t, k), _value(body.subs(t, k), found, env)) for k in range(1, found.steps + 1))
    value = sp.ImmutableMatrix(sum((v for _, v in terms[1:]), terms[0][1]))
    return Worked(param, total.subs(T, found.steps), terms, value)
