"""Cells with several states: the closed form over the stacked adjoint, with the block
transposed Jacobian A_k, equals the recursion, evaluated step by step on explicit matrices."""

import pytest
import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.closed_form import NoClosedForm, block_closed_form, k
from bptt.derive.explicit import backward, evaluate, unroll
from bptt.derive.models import load
from bptt.derive.nodes import Adj
from bptt.documents.latex import latex

STEPS = 3


@pytest.mark.parametrize("name", ["lstm", "lstm-peephole"])
def test_block_closed_form_equals_the_recursion(name, concrete_problem):
    case = concrete_problem(name, STEPS, seed=5)
    env = case.values_env(30)
    unroll(case.model, STEPS, env)
    derivation = derive(case.model)
    backward(derivation, STEPS, env)
    form = block_closed_form(derivation)

    def block_matrix(step):
        return sp.Matrix(
            sp.BlockMatrix(
                [[evaluate(form.blocks[(r, c)].subs(k, step), env, STEPS) for c in form.states] for r in form.states]
            )
        )

    def beta(step):
        return sp.Matrix.vstack(*(evaluate(form.local[s].subs(form.expr.index, step), env, STEPS) for s in form.states))

    for start in range(1, STEPS + 1):
        total, product = sp.zeros(*beta(start).shape), sp.eye(beta(start).shape[0])
        for stop in range(start, STEPS + 1):
            if stop > start:
                product = product * block_matrix(stop)
            total += product * beta(stop)
        stacked = sp.Matrix.vstack(*(env[Adj(s(start))] for s in form.states))
        assert max(abs(v) for v in (total - stacked)) < sp.Float(10) ** -25, (name, start)


def test_the_blocks_are_named_and_a_single_state_has_none():
    form = block_closed_form(derive(load("lstm")))
    assert latex(form.block_matrix()).count(r"\mathbf{A}^{") == 4
    with pytest.raises(NoClosedForm):
        block_closed_form(derive(load("gru")))


@pytest.mark.parametrize("name", ["lstm", "lstm-peephole"])
def test_documents_of_several_states_show_the_block_closed_form_and_window(name):
    from bptt.documents.document import sections

    by_title = {section.title: section for section in sections(load(name))}
    block = by_title["Closed form over the stacked states"]
    assert any("It satisfies the recursion: its $j = t$ term" in display.after for display in block.displays)
    assert sum(eq.lhs.startswith(r"\mathbf{A}^{") for eq in block.equations) == 4
    window = by_title["Truncated backpropagation through time"].equations
    assert any("over the stacked states" in eq.why and r"\min" in eq.rhs for eq in window)
