"""Cells with several states: the closed form over the stacked adjoint, with the step Jacobian A_k chained
through the step in named factors, equals the recursion, evaluated step by step on explicit matrices; and A_k
is the transposed Jacobian of one step's equations, computed here by sympy from the equations themselves."""

import itertools
import pathlib

import pytest
import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.closed_form import NoClosedForm, block_closed_form, k
from bptt.derive.explicit import backward, evaluate, unroll
from bptt.derive.models import load
from bptt.derive.nodes import Adj, t
from bptt.documents.latex import latex

STEPS = 3
TWO_LAYERS = str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "lstm_2layer.py") + ":lstm"
CELLS = ["lstm", "lstm-peephole", TWO_LAYERS]


def _ids(name):
    return name.rpartition("/")[2]


def _solved(name, concrete_problem):
    case = concrete_problem(load(name), STEPS, seed=5)
    env = case.values_env(30)
    unroll(case.model, STEPS, env)
    derivation = derive(case.model)
    backward(derivation, STEPS, env)
    return case, env, block_closed_form(derivation)


def _block_matrix(form, step, env):
    blocks = form.blocks
    return sp.Matrix(
        sp.BlockMatrix([[evaluate(blocks[(r, c)].subs(k, step), env, STEPS) for c in form.states] for r in form.states])
    )


@pytest.mark.parametrize("name", CELLS, ids=_ids)
def test_block_closed_form_equals_the_recursion(name, concrete_problem):
    """zeta_t from the closed form, then each state's adjoint from zeta_t and the same-step factors S, the latest
    state first, equals the adjoints the recursion computes."""
    _, env, form = _solved(name, concrete_problem)

    def beta(step):
        return sp.Matrix.vstack(*(evaluate(form.local[s].subs(form.expr.index, step), env, STEPS) for s in form.states))

    for start in range(1, STEPS + 1):
        total, product = sp.zeros(*beta(start).shape), sp.eye(beta(start).shape[0])
        for stop in range(start, STEPS + 1):
            if stop > start:
                product = product * _block_matrix(form, stop, env)
            total += product * beta(stop)
        ends = list(itertools.accumulate(int(s.rows.xreplace(env)) for s in form.states))
        zeta = {s: total[end - int(s.rows.xreplace(env)) : end, :] for s, end in zip(form.states, ends, strict=True)}
        adjoints = {}
        for u in reversed(form.states):
            adjoints[u] = zeta[u] + sum(
                (
                    evaluate(value.subs(k, start), env, STEPS) * adjoints[v]
                    for (w, v), value in form.same.items()
                    if w == u
                ),
                sp.zeros(*zeta[u].shape),
            )
            assert max(abs(x) for x in adjoints[u] - env[Adj(u(start))]) < sp.Float(10) ** -25, (name, start, u)


@pytest.mark.parametrize("name", CELLS, ids=_ids)
def test_the_step_jacobian_is_the_steps_own(name, concrete_problem):
    """A_k^T = d s_k / d s_{k-1}, each state at k-1 perturbed alone, from step k's equations themselves: column by
    column by the complex step, s_k(s_{k-1} + i e e_n) has imaginary part e (d s_k / d s_{k-1}) e_n + O(e^3),
    against A_k's blocks chained from the named factors P and S."""
    case, env, form = _solved(name, concrete_problem)
    step, tiny = 2, sp.Float(10, 60) ** -15
    columns = []
    for u in form.states:
        for n in range(int(u.rows.xreplace(env))):
            nudged = sp.zeros(int(u.rows.xreplace(env)), 1)
            nudged[n] = sp.I * tiny
            local = env | {u(step - 1): sp.ImmutableMatrix(env[u(step - 1)] + nudged)}
            for seq, rhs in case.model.steps:
                local[seq(step)] = evaluate(rhs.subs(t, step), local, STEPS).evalf(60)
            stacked = sp.Matrix.vstack(*(sp.Matrix(local[s(step)]) for s in form.states))
            columns.append(stacked.applyfunc(lambda v: sp.im(v) / tiny))
    brute = sp.Matrix.hstack(*columns)
    chained = _block_matrix(form, step, env).T
    assert max(abs(x) for x in brute - chained) < sp.Float(10) ** -25


def test_the_blocks_are_named_and_a_single_state_has_none():
    form = block_closed_form(derive(load("lstm")))
    assert latex(form.block_matrix()).count(r"\mathbf{A}^{") == 4
    with pytest.raises(NoClosedForm):
        block_closed_form(derive(load("gru")))


def test_a_two_layer_lstm_chains_through_the_step_in_named_factors():
    """Layer 2 reads h1_k in step k: its blocks read A^{h1h1}_k times S^{h1c2}_k, not the values of step k-2."""
    form = block_closed_form(derive(load(TWO_LAYERS)))
    names = {s.name: s for s in form.states}
    assert [s.name for s in form.states] == ["c1", "h1", "c2", "h2"]
    assert latex(form.chain[(names["h1"], names["c2"])]) == r"\mathbf{A}^{h1,h1}_{k} \mathbf{S}^{h1,c2}_{k}"
    for block in form.blocks.values():
        times = {v.time for v in block.atoms(sp.MatrixExpr) if hasattr(v, "time") and hasattr(v, "role")}
        assert times <= {k, k - 1}, times


@pytest.mark.parametrize("name", ["lstm", "lstm-peephole"])
def test_documents_of_several_states_show_the_block_closed_form_and_window(name):
    from bptt.documents.document import sections

    by_title = {section.title: section for section in sections(load(name))}
    block = by_title["Closed form over the stacked states"]
    assert any("It satisfies the recursion: its $j = t$ term" in display.after for display in block.displays)
    assert sum(eq.lhs.startswith(r"\mathbf{A}^{") for eq in block.equations) == 4
    window = by_title["Truncated backpropagation through time"].equations
    assert any("over the stacked states" in eq.why and r"\min" in eq.rhs for eq in window)
