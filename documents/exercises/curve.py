"""The "predict the curve" item, from the derivation's gradient-flow analysis: given the recurrent weight's
spectral radius (or a carousel's gate value), which curve of ||dh_T/dh_t|| against T - t vanishes."""

import random
from dataclasses import dataclass

import sympy as sp

from bptt.documents.exercises.numbers import number
from bptt.documents.latex import latex

SMALL = tuple(sp.Rational(v) for v in ("1/4", "1/3", "1/2", "2/3"))
LARGE = tuple(sp.Rational(v) for v in ("5/4", "3/2", "2"))
KEPT = tuple(sp.Rational(v) for v in ("9/10", "19/20", "99/100"))
SPAN = 10  # the T - t at which the answer gives the numbers


@dataclass(frozen=True)
class Curve:
    question: str
    answer: str
    vanishes: str  # "A", "B" or "" (neither)


def curve_question(found, flow):
    rng = random.Random(f"{found.model.name}:{found.seed}:curve")
    small, large, kept = rng.choice(SMALL), rng.choice(LARGE), rng.choice(KEPT)
    if flow is None or not flow.states:
        return _forced(found.model)
    if flow.carousels:
        return _carousel(flow.carousels[0], small, kept)
    return _radius(flow, small, large)


def _forced(model):
    question = (
        "Predict the curve: plot $\\|\\partial L / \\partial \\mathbf{h}_t\\|$ against $T - t$ for a long sequence. "
        "Does the part of it that flows back from later steps vanish, explode, or neither?"
    )
    answer = (
        "Neither: under teacher forcing every value a step reads from the step before is data, so no gradient "
        "flows from one step to an earlier one; each step's gradient is its own, whatever the weights' spectral "
        "radius."
    )
    return Curve(question, answer, "")


def _radius(flow, small, large):
    (W,) = flow.bound.matrices if flow.bound is not None and len(flow.bound.matrices) == 1 else flow.recurrent[:1]
    name, state = latex(W), latex(flow.states[0]())
    step = rf"\|\partial {latex(flow.states[0](sp.Symbol('T')))} / \partial {state}\|"
    question = (
        f"Predict the curve: two runs differ only in ${name}$, symmetric in both, with spectral radius "
        f"$\\rho_A = {number(small)}$ in run A and $\\rho_B = {number(large)}$ in run B. Curves A and B plot "
        f"${step}$ against $T - t$. Which curve surely vanishes? Does the other surely explode?"
    )
    gamma = flow.bound.gamma if flow.bound is not None else 1
    linear = flow.bound is not None and not flow.bound.slopes
    a_value, b_value = (gamma * small) ** SPAN, (gamma * large) ** SPAN
    answer = (
        f"The step Jacobian is $\\mathbf{{J}}_k = {latex(flow.jacobian)}$, and for a symmetric ${name}$ its largest "
        f"singular value is $\\rho$, so ${step} \\le (\\gamma \\rho)^{{T-t}}$ with $\\gamma = {number(gamma)}$ the "
        f"largest slope of the activation. Run A: $(\\gamma\\rho_A)^{{{SPAN}}} = {number(a_value)}$ at "
        f"$T - t = {SPAN}$: curve A vanishes, geometrically. "
    )
    if linear:
        answer += (
            f"Run B: here $\\mathbf{{J}}_k = {name}$ exactly, so the product is ${name}^{{T-t}}$, of norm "
            f"$\\rho_B^{{T-t}}$ along the top eigenvector (${number(b_value)}$ at $T - t = {SPAN}$): curve B explodes."
        )
    else:
        answer += (
            f"Run B: the bound $(\\gamma\\rho_B)^{{{SPAN}}} = {number(b_value)}$ grows, which allows the gradient to "
            "explode but does not force it: where the activation saturates its slope is far below $\\gamma$, and "
            "curve B may vanish too. A spectral radius above $1/\\gamma$ is necessary for exploding, not sufficient."
        )
    return Curve(question, answer, "A")


def _carousel(carousel, small, kept):
    k = sp.Symbol("k", integer=True)
    before, after, factor = latex(carousel.state(k - 1)), latex(carousel.state(k)), latex(carousel.direct)
    question = (
        f"Predict the curve: along the path from ${before}$ to ${after}$ "
        f"the factor is ${factor}$. In run A every entry of that gate is ${number(small)}$, in run B "
        f"${number(kept)}$. Curves A and B plot the product of these factors from step $t$ to $T$ against "
        f"$T - t$. Which vanishes fast?"
    )
    answer = (
        f"The product of the factors is the gate's value to the power $T - t$. At $T - t = {SPAN}$ it is "
        f"${number(small**SPAN)}$ in run A and ${number(kept**SPAN)}$ in run B: curve A vanishes fast, while "
        "in run B the carousel carries the gradient across many steps, which is what the gate is for."
    )
    return Curve(question, answer, "A")
