"""Issue 28: a norm's adjoint as a textbook writes it, (1/σ)(I − (1/n)11ᵀ − (1/n)x̂x̂ᵀ) ∂L/∂x̂
(derive/norm_adjoint.py). The collected derivation (what the documents print) equals the chain rule over the
unrolled loss to 30 digits; each norm's input reads one NormAdjoint and nothing of the mean's or the deviation's
adjoints; the document prints the compact form, and no reduction, in its adjoints."""

import pathlib

import mpmath
import numpy as np
import pytest
import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.explicit import backward, unroll
from bptt.derive.models import load
from bptt.derive.nodes import Adj
from bptt.derive.norm_adjoint import NormAdjoint, compact, norms
from bptt.documents.render import document
from bptt.tests.support.brute_force import DIGITS, recorded_gradients
from bptt.tests.support.problems import make_problem

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "layer_norm_cells.py"
CELLS = ("lstm-layernorm", *(f"{EXAMPLES}:{name}" for name in ("elman_layernorm", "gru_rmsnorm")))


@pytest.mark.parametrize("cell", CELLS)
def test_the_collected_derivation_agrees_with_the_unrolled_loss_to_30_digits(cell):
    case = make_problem(cell, 2, seed=5)
    brute = recorded_gradients(case)
    env = case.values_env(DIGITS)
    unroll(case.model, case.steps, env)
    derivation = compact(derive(case.model, named="textbook"))
    assert any(value.has(NormAdjoint) for value in _values(derivation))
    derived = backward(derivation, case.steps, dict(env))
    assert set(derived) == set(case.entries)
    for name, symbols in case.entries.items():
        for index, symbol in np.ndenumerate(np.array(symbols.tolist(), dtype=object)):
            with mpmath.workdps(DIGITS):
                got, want = mpmath.mpf(derived[name][index]), brute[symbol]
                assert abs(got - want) <= mpmath.mpf(10) ** -30 * max(1, abs(want)), (name, index)


def _values(derivation):
    tables = (derivation.states, derivation.forced, derivation.intermediates)
    return [c.value for table in tables for contributions in table.values() for c in contributions]


def test_each_norm_input_reads_one_compact_adjoint():
    """Ba et al.'s three norms (of W_h h_{t-1}, W_x x_t and c_t): the input of each has one NormAdjoint among its
    contributions, of its own x̂ and σ; no contribution reads the adjoint of a mean or a deviation, which the
    collected derivation no longer holds."""
    model = load("lstm-layernorm")
    found = norms(model)
    assert len(found) == 3 and all(norm.mu is not None for norm in found)
    derivation = compact(derive(model, named="textbook"))
    folded = {seq.name for norm in found for seq in (norm.mu, norm.sigma)}
    assert not folded & {seq.name for seq in derivation.intermediates}
    for norm in found:
        table = derivation.states if norm.v.role == "state" else derivation.intermediates
        compacts = [c.value for c in table[norm.v] if c.value.has(NormAdjoint)]
        assert len(compacts) == 1, norm
        (node,) = compacts[0].atoms(NormAdjoint)
        assert (node.hat.name, node.sigma.name, node.centred) == (norm.hat.name, norm.sigma.name, True)
    adjoints_of = {a.of.name for value in _values(derivation) for a in value.atoms(Adj)}
    assert not folded & adjoints_of


def test_rms_norm_has_no_centring_term():
    model = load(f"{EXAMPLES}:gru_rmsnorm")
    found = norms(model)
    assert len(found) == 2 and all(norm.mu is None for norm in found)
    nodes = set().union(*(value.atoms(NormAdjoint) for value in _values(compact(derive(model, named="textbook")))))
    assert {node.centred for node in nodes} == {False}
    node = next(iter(nodes))
    assert not any(isinstance(term, sp.OneMatrix) for term in sp.preorder_traversal(node.projection()))


def test_the_document_prints_the_compact_form():
    """The intermediate and state adjoints of lstm-layernorm read (1/σ)(I − 11ᵀ/(4h) − x̂x̂ᵀ/(4h)) diag(α) ∂L/∂a_t
    and (1/σ_c)(I − 11ᵀ/h − ĉĉᵀ/h) ∂L/∂ĉ_t, and no mean, no deviation's adjoint."""
    text = document(load("lstm-layernorm"), "tex", ("intermediates", "backward"))
    for n in ("4 h", "h"):
        assert rf"\left(\mathbf{{I}} - \frac{{1}}{{{n}}} \mathbf{{1}} \mathbf{{1}}^\top - \frac{{1}}{{{n}}} " in text
    assert (
        r"\hat{\mathbf{c}}_{t} \hat{\mathbf{c}}_{t}^\top\right) \frac{\partial L}{\partial \hat{\mathbf{c}}_{t}}"
        in text
    )
    assert (
        r"\operatorname{diag}\left(\boldsymbol{\alpha}_\textrm{1}\right) \frac{\partial L}{\partial \mathbf{a}_{t}}"
        in text
    )
    assert r"\operatorname{mean}" not in text
    assert r"\partial \boldsymbol{\mu}" not in text and r"\partial \boldsymbol{\sigma}" not in text
