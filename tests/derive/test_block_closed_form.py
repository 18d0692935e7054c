"""Cells with several states: the closed form over the stacked adjoint, with the step Jacobian A_k chained
through the step in named factors, equals the recursion, evaluated step by step on explicit matrices; and A_k
is the transposed Jacobian of one step's equations, computed here by sympy from the equations themselves."""

import itertools
import pathlib

import pytest
import sympy as sp
from sympy import HadamardProduct

from bptt.derive.bptt import derive
from bptt.derive.closed_form import NoClosedForm, block_closed_form, k
from bptt.derive.directional import directional_forms
from bptt.derive.explicit import backward, evaluate, unroll
from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.models import load
from bptt.derive.nodes import Adj, SquaredError, sigmoid, t, tanh
from bptt.documents.latex import latex

STEPS = 3
TWO_LAYERS = str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "lstm_2layer.py") + ":lstm"


def bidirectional_lstm():
    """A bidirectional LSTM, one matrix per gate: the forward c_f, h_f read at t-1, the reverse c_b, h_b at t+1,
    and a head reading both, s_t = V_f h_f,t + V_b h_b,t, with a squared error."""
    d, h, q = sizes("d h q")
    x = sequence("x", d, "input")
    params, steps, tops = [], [], []
    for way, before in (("f", t - 1), ("b", t + 1)):
        cell, hidden = sequence(f"c_{way}", h, "state"), sequence(f"h_{way}", h, "state")
        gates = {}
        for gate, activation in (("i", sigmoid), ("f", sigmoid), ("g", tanh), ("o", sigmoid)):
            W, U, b = matrix(f"W{gate}_{way}", h, d), matrix(f"U{gate}_{way}", h, h), vector(f"b{gate}_{way}", h)
            params += [W, U, b]
            value = sequence(f"{gate}_{way}", h, "intermediate")
            steps.append((value, activation(W * x() + U * hidden(before) + b)))
            gates[gate] = value()
        steps.append((cell, HadamardProduct(gates["f"], cell(before)) + HadamardProduct(gates["i"], gates["g"])))
        steps.append((hidden, HadamardProduct(gates["o"], tanh(cell()))))
        tops.append((matrix(f"V_{way}", q, h), hidden))
    s, y = sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name="bilstm",
        title="A bidirectional LSTM",
        source="a test",
        sizes=(d, h, q),
        params=(*params, *(V for V, _ in tops)),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, tops[0][0] * tops[0][1]() + tops[1][0] * tops[1][1]()),),
        loss=SquaredError(s(), y()),
    )


CELLS = ["lstm", "lstm-peephole", TWO_LAYERS, "bilstm"]


def _model(name):
    return bidirectional_lstm() if name == "bilstm" else load(name)


def _ids(name):
    return name.rpartition("/")[2]


def _solved(name, concrete_problem):
    """The problem, its values and adjoints at STEPS steps, and its block closed forms (one a direction)."""
    case = concrete_problem(_model(name), STEPS, seed=5)
    env = case.values_env(30)
    unroll(case.model, STEPS, env)
    derivation = derive(case.model)
    backward(derivation, STEPS, env)
    if name == "bilstm":
        forms = list({id(f): f for f in directional_forms(derivation).values()}.values())
        assert [f.reverse for f in forms] == [False, True]
    else:
        forms = [block_closed_form(derivation)]
    return case, env, forms


@pytest.fixture(scope="module")
def solved(concrete_problem):
    """_solved(name), computed once for both proofs: they read its values and forms and change none of them."""
    found = {}

    def solve(name):
        if name not in found:
            found[name] = _solved(name, concrete_problem)
        return found[name]

    return solve


def _block_matrix(form, step, env):
    blocks = form.blocks
    return sp.Matrix(
        sp.BlockMatrix([[evaluate(blocks[(r, c)].subs(k, step), env, STEPS) for c in form.states] for r in form.states])
    )


def _rows(state, env):
    return int(state.rows.xreplace(env))


@pytest.mark.parametrize("name", CELLS, ids=_ids)
def test_block_closed_form_equals_the_recursion(name, solved):
    """zeta_t from the closed form (a forward direction: sum over j >= t of A_{t+1} ... A_j omega_j; a reverse one:
    over j <= t of B_{t-1} ... B_j kappa_j), then each state's adjoint from zeta_t and the same-step factors S, the
    latest state first, equals the adjoints the recursion computes."""
    _, env, forms = solved(name)
    for form in forms:
        # each step's local term and block matrix, evaluated once for every sum that reads them
        local = {
            step: sp.Matrix.vstack(
                *(evaluate(form.local[s].subs(form.expr.index, step), env, STEPS) for s in form.states)
            )
            for step in range(1, STEPS + 1)
        }
        chained = range(1, STEPS) if form.reverse else range(2, STEPS + 1)  # the steps a product reaches
        block = {step: _block_matrix(form, step, env) for step in chained}
        for start in range(1, STEPS + 1):
            total, product = sp.zeros(*local[start].shape), sp.eye(local[start].shape[0])
            stops = range(start, 0, -1) if form.reverse else range(start, STEPS + 1)
            for stop in stops:
                if stop != start:
                    product = product * block[stop]
                total += product * local[stop]
            ends = list(itertools.accumulate(_rows(s, env) for s in form.states))
            zeta = {s: total[end - _rows(s, env) : end, :] for s, end in zip(form.states, ends, strict=True)}
            adjoints = {}
            for u in reversed(form.states):
                reached = [
                    evaluate(value.subs(k, start), env, STEPS) * adjoints[v]
                    for (w, v), value in form.same.items()
                    if w == u
                ]
                adjoints[u] = zeta[u] + sum(reached, sp.zeros(*zeta[u].shape))
                assert max(abs(x) for x in adjoints[u] - env[Adj(u(start))]) < sp.Float(10) ** -25, (name, start, u)


@pytest.mark.parametrize("name", CELLS, ids=_ids)
def test_the_step_jacobian_is_the_steps_own(name, solved):
    """A_k^T = d s_k / d s_{k-1} (B_k^T = d s_k / d s_{k+1} for reverse-time states), each state perturbed alone,
    from step k's equations themselves: column by column by the complex step, s_k(s_{k-1} + i e e_n) has imaginary
    part e (d s_k / d s_{k-1}) e_n + O(e^3), against the blocks chained from the named factors P and S."""
    case, env, forms = solved(name)
    step, tiny = 2, sp.Float(10, 60) ** -15
    for form in forms:
        columns = []
        for u in form.states:
            read = u(step + 1) if form.reverse else u(step - 1)
            for n in range(_rows(u, env)):
                nudged = sp.zeros(_rows(u, env), 1)
                nudged[n] = sp.I * tiny
                local = env | {read: sp.ImmutableMatrix(env[read] + nudged)}
                for seq, rhs in case.model.steps:
                    local[seq(step)] = evaluate(rhs.subs(t, step), local, STEPS).evalf(60)
                stacked = sp.Matrix.vstack(*(sp.Matrix(local[s(step)]) for s in form.states))
                columns.append(stacked.applyfunc(lambda v: sp.im(v) / tiny))
        brute = sp.Matrix.hstack(*columns)
        chained = _block_matrix(form, step, env).T
        assert max(abs(x) for x in brute - chained) < sp.Float(10) ** -25, (name, form.reverse)


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


def test_a_bidirectional_lstm_has_a_closed_form_in_each_direction():
    """Issue 27: the reverse-time states c_b, h_b read each other from step to step; their direction gets the
    stacked closed form, B_k chained from P and S and unrolled from t = 1, as the forward one is."""
    from bptt.documents.document import sections

    (section,) = sections(bidirectional_lstm(), only=("closed-form",))
    rows = " ".join(row for eq in section.equations for row in eq.rows)
    assert "No closed form" not in section.text
    assert r"\mathbf{A}^{hf,hf}_{k} = \mathbf{A}^{hf,cf}_{k} \mathbf{S}^{cf,hf}_{k} + \mathbf{P}^{hf,hf}_{k}" in rows
    assert r"\mathbf{B}^{hb,hb}_{k} = \mathbf{B}^{hb,cb}_{k} \mathbf{S}^{cb,hb}_{k} + \mathbf{P}^{hb,hb}_{k}" in rows
    assert r"\sum_{j=1}^{t} \left(\mathbf{B}_{t-1} \mathbf{B}_{t-2} \cdots \mathbf{B}_{j}\right)" in rows


@pytest.mark.parametrize("name", ["lstm", "lstm-peephole", TWO_LAYERS, "bilstm"], ids=_ids)
def test_no_block_of_the_closed_form_runs_past_a_quarter_page(name):
    """Every block is written in named factors, so none is long: at most 6 rows (a page holds about 40; the
    two-layer LSTM's A^{h1c2}_k took 30 rows when the paths inside a step were folded in)."""
    from bptt.documents.document import sections

    (section,) = sections(_model(name), only=("closed-form",))
    longest = max(section.equations, key=lambda eq: len(eq.rows))
    assert len(longest.rows) <= 6, (longest.lhs, len(longest.rows))
