"""Each backward pass of the shared pipeline (codegen/program.py: SHARED_PASSES) on a small cell's Program: the
Program it starts from, the pass applied, what it changed, and that nothing else changed."""

from dataclasses import fields

import sympy as sp
from sympy import HadamardProduct as odot

from bptt.codegen.ir import Assign, Copy, Flow, Guard, Program, Rows, the_loop, walk
from bptt.codegen.ir_checkpoints import Boundary
from bptt.codegen.passes.checkpoint import checkpointed
from bptt.codegen.passes.collapse import collapsed_chains
from bptt.codegen.passes.fresh import fresh_returns
from bptt.codegen.passes.fuse_backward import fused_flows, fused_gradients
from bptt.codegen.passes.hoist import hoisted_factors, hoisted_slopes
from bptt.codegen.passes.inline import inlined_adjoints
from bptt.codegen.passes.slopes import named_slopes
from bptt.codegen.passes.storage import adjoint_arrays
from bptt.codegen.passes.window import aged_adjoints, plain_window
from bptt.derive.models import load
from bptt.derive.nodes import Adj, Diag, SeqAt, t
from bptt.tests.support import user_cells
from bptt.tests.support.norm_cells import one_unit_norms
from bptt.tests.support.passes import before, in_loop, outside_loop
from bptt.tests.support.window_cells import local_flow

XDIST_GROUP = "passes"  # one worker derives each cell once for every pass's test


def applied(model, one):
    """(the Program `one` starts from for the model (a zoo cell's name, or a Model), the Program after it)."""
    start = before(load(model) if isinstance(model, str) else model, one)
    return start, one(start)


def changed(start, done):
    return {f.name for f in fields(Program) if getattr(start, f.name) != getattr(done, f.name)}


def adjoint_targets(statements):
    return [s.target.of.name for s in statements if isinstance(getattr(s, "target", None), Adj)]


def adjoints_read(value):
    return {a.of.name for a in value.atoms(Adj)}


def test_named_slopes_names_the_adjoint_of_a_pre_activation():
    """The minimal gated unit's f_t = sigmoid(...) names no f_bar_t: every read of dL/df_t comes after
    diag((1 - f_t) * f_t). That product becomes dL/d_pre_f_t, assigned once a step right after dL/df_t and read
    in its place (the flow, dL/dh_0, the gradients), and recurrent as dL/df is."""
    start, done = applied(user_cells.mgu(), named_slopes)
    f = next(seq for seq, _ in start.model.steps if seq.name == "f")
    slope = Diag(odot(1 - f(), f()))
    body = list(the_loop(done.adjoints.statements).body)
    (named,) = [s for s in body if adjoint_targets([s]) == ["_pre_f"]]
    assert named == Assign(Adj(SeqAt("_pre_f", t, f.rows, "intermediate")), slope * Adj(f()), named.comment)
    assert adjoint_targets([body[body.index(named) - 1]]) == ["f"]
    reads = [s.value for s in walk(done.adjoints.statements) if hasattr(s, "value") and s is not named]
    reads += [i.value for i in done.initial] + [value for _, value, _ in done.returns]
    assert not any("f" in adjoints_read(value) for value in reads)
    assert "_pre_f" in adjoints_read(done.initial[0].value) and "_pre_f" in done.recurrent
    assert "_pre_f" not in start.recurrent and not any("_pre_" in str(v) for _, v, _ in start.returns)
    assert changed(start, done) == {"adjoints", "initial", "returns", "recurrent"}


def test_plain_window_keeps_the_adjoints_as_they_are_for_the_window_pass():
    """The window pass starts as the adjoint statements and dL/dS_0 after the slopes are named."""
    start, done = applied("elman", plain_window)
    assert start.window.statements == () and start.window_initial == ()
    assert done.window.statements == start.adjoints.statements and done.window_initial == start.initial
    assert changed(start, done) == {"window", "window_initial"}


def test_inlined_adjoints_substitutes_an_adjoint_read_once_in_its_step():
    """The GRU's dL/dn_t = diag(1 - z_t) dL/dh_t, read once (by dL/dn_bar_t), is computed inside it."""
    start, done = applied("gru", inlined_adjoints)
    assert "n" in adjoint_targets(in_loop(start.adjoints)) and "n" not in adjoint_targets(in_loop(done.adjoints))
    (n_bar,) = [s for s in in_loop(done.adjoints) if adjoint_targets([s]) == ["n_bar"]]
    assert adjoints_read(n_bar.value) == {"h"} and sum(isinstance(f, Diag) for f in n_bar.value.args) == 2
    assert changed(start, done) == {"adjoints"}


def test_fused_flows_makes_one_product_of_the_gates_flows():
    """The GRU's flow W_hr^T dL/dr_bar + W_hz^T dL/dz_bar + W_hn^T dL/dm becomes one product with the forward
    pass's stack, over a group of the three adjoints; dL/dh_0 too."""
    start, done = applied("gru", fused_flows)

    def flow(program):
        (statement,) = [s for s in in_loop(program.adjoints) if isinstance(s, Flow)]
        return statement.value

    assert len([a for a in flow(start).atoms(sp.Transpose)]) == 3
    (product,) = flow(done).atoms(sp.Transpose)
    assert product.arg.name == "_W_hr_W_hz_W_hn" and [s.name for s in done.adjoints.stacks] == ["_W_hr_W_hz_W_hn"]
    (group,) = done.adjoints.arrays
    assert group.name == "_d_r_bar_z_bar_m" and [m for m, _ in group.members] == ["d_r_bar", "d_z_bar", "d_m"]
    assert adjoints_read(done.initial[0].value) == {"h", "_r_bar_z_bar_m"}
    assert changed(start, done) == {"adjoints", "initial"}


def test_fused_gradients_makes_one_product_of_neighbouring_gates_gradients():
    """The GRU's dW_hr, dW_hz and dW_hn are one product over the adjoints' group, each its rows of it; dW_ir and
    dW_iz one over the span of r_bar and z_bar, which the group gains."""
    start, done = applied("gru", fused_gradients)
    assert start.gradients.statements == ()
    products = {s.target.name: s for s in done.gradients.statements}
    assert set(products) == {"_d_W_hr_W_hz_W_hn", "_d_W_ir_W_iz", "_d_b_ir_b_iz_b_hn"}
    returns = {key: value for key, value, _ in done.returns}
    h = start.model.sizes[1]
    assert returns["W_hz"] == Rows(sp.MatrixSymbol("_d_W_hr_W_hz_W_hn", 3 * h, h), h, h)
    assert done.adjoints.arrays[0].spans == (("_d_r_bar_z_bar", 0, 2),)
    assert changed(start, done) == {"adjoints", "gradients", "returns"}


def test_hoisted_factors_computes_the_slopes_before_the_loop():
    """Elman's dL/da_t = diag(1 - h_t^2) dL/dh_t: the slope 1 - h_t^2 is an array _k1 computed for all steps
    before the loop, and the loop reads it."""
    start, done = applied("elman", hoisted_factors)
    (factor,) = [s for s in outside_loop(done.adjoints) if getattr(s.target, "name", "") == "_k1"]
    h = next(seq for seq in start.model.states if seq.name == "h")
    assert factor.value == sp.OneMatrix(h.rows, 1) - sp.HadamardPower(h(), 2)
    (slope,) = [s for s in in_loop(done.adjoints) if adjoint_targets([s]) == ["a"]]
    assert slope.value == Diag(factor.target) * Adj(h()) and "_k1" not in str(start.adjoints)
    assert [a.name for a in done.adjoints.arrays] == ["_k1"] and start.adjoints.arrays == ()
    assert changed(start, done) == {"adjoints"}


def test_collapsed_chains_reads_an_adjoint_through_its_chain_and_moves_it_out_of_the_loop():
    """The GRU's dL/dn_bar_t = diag(_k1_t) dL/dh_t is read in the loop only through chains (by dL/dm and
    dL/dr_bar): they read dL/dh_t through it, and dL/dn_bar_t, which the gradients need, leaves the loop."""
    start, done = applied("gru", collapsed_chains)
    assert "n_bar" in adjoint_targets(in_loop(start.adjoints))
    assert "n_bar" not in adjoint_targets(in_loop(done.adjoints))
    assert adjoint_targets(done.adjoints.statements)[-1] == "n_bar"  # after the loop, all steps at once
    assert not any("n_bar" in adjoints_read(s.value) for s in in_loop(done.adjoints) if hasattr(s, "value"))
    assert changed(start, done) == {"adjoints"}


def test_collapsed_chains_drops_the_terms_that_cancel():
    """A layer norm over one unit (tests/support/norm_cells.py:one_unit_norms): the terms of dL/da_t through
    dL/da_hat_t sum to diag(0) (I - 1 1^T / n for n = 1), so they are dropped, and the comment says so; the RMS
    norm's terms through dL/da_hat2_t are one slope as usual. No diag of zeros is left for a backend to print."""
    start, done = applied(one_unit_norms(), collapsed_chains)
    (was,), (into_a,) = ([s for s in in_loop(p.adjoints) if adjoint_targets([s]) == ["a"]] for p in (start, done))
    assert {"a_hat", "a_hat2"} <= adjoints_read(was.value) and adjoints_read(into_a.value) == {"a_hat2"}
    assert "the terms through dL/da_hat_t cancel" in into_a.comment
    values = [s.value for s in walk(done.adjoints.statements) if hasattr(s, "value")]
    assert not any(isinstance(diag.vector, sp.ZeroMatrix) for value in values for diag in value.atoms(Diag))
    assert changed(start, done) == {"adjoints"}


def test_hoisted_slopes_computes_the_collapsed_slopes_before_the_loop():
    """The products of diag factors that collapsed_chains made in the GRU's loop (diag(r_t) diag(_k1_t)) become
    arrays _a1, _a2 before it, and each statement of the loop reads one diag factor."""
    start, done = applied("gru", hoisted_slopes)

    def diag_products(program):
        return [s for s in in_loop(program.adjoints) if hasattr(s, "value") and len(s.value.atoms(Diag)) > 1]

    assert diag_products(start) and not diag_products(done)
    assert {"_a1", "_a2"} <= {a.name for a in done.adjoints.arrays}
    assert {"_a1", "_a2"} <= {getattr(s.target, "name", "") for s in outside_loop(done.adjoints)}
    assert changed(start, done) == {"adjoints"}


def test_adjoint_arrays_gives_each_adjoint_an_array_but_the_groups_members():
    """The GRU's adjoints Pass gains d_h and d_n_bar between its group and its factors; d_m, d_r_bar and
    d_z_bar are the group's members, not arrays of their own."""
    start, done = applied("gru", adjoint_arrays)
    before_names, after_names = [a.name for a in start.adjoints.arrays], [a.name for a in done.adjoints.arrays]
    assert after_names == [before_names[0], "d_h", "d_n_bar", *before_names[1:]]
    assert not {"d_m", "d_r_bar", "d_z_bar"} & set(after_names)
    assert changed(start, done) == {"adjoints"}


def test_adjoint_arrays_lets_an_adjoint_share_the_array_it_is_computed_from():
    """Elman's dL/da_t = diag(_k1_t) dL/dh_t, where nothing reads dL/dh_t after it: d_a is a view of d_h."""
    start, done = applied("elman", adjoint_arrays)
    (d_h,) = [a for a in done.adjoints.arrays if a.name == "d_h"]
    assert [m for m, _ in d_h.members] == ["d_a"] and "d_a" not in [a.name for a in done.adjoints.arrays]


def test_fresh_returns_copies_a_view_that_another_return_views():
    """The GRU's b_ir and b_hr are the same rows of one product: the second returned is a copy; owned_returns
    copies every rows view (torch)."""
    start, done = applied("gru", fresh_returns)
    returns = {key: value for key, value, _ in done.returns}
    assert not isinstance(returns["b_ir"], Copy) and returns["b_hr"] == Copy(returns["b_ir"])
    assert not any(isinstance(value, Copy) for _, value, _ in start.returns) and start.owned_returns == ()
    assert all(isinstance(value, Copy) for _, value, _ in done.owned_returns if isinstance(value, (Rows, Copy)))
    assert changed(start, done) == {"returns", "owned_returns"}


def test_checkpointed_marks_the_boundaries_and_plans_the_checkpoints():
    """Elman's flow W^T dL/da_{t+1} into dL/dh_t is a Boundary in both passes, whose second body reads what
    step 1 of the next segment gives (_d_next_a); the Checkpoints keep the state h and weigh its rows."""
    start, done = applied("elman", checkpointed)
    for field in ("adjoints", "window"):
        assert [type(s) for s in in_loop(getattr(start, field)) if isinstance(s, Guard)] == [Guard]
        (boundary,) = [s for s in in_loop(getattr(done, field)) if isinstance(s, Guard)]
        assert (
            isinstance(boundary, Boundary)
            and boundary.body == next(s for s in in_loop(getattr(start, field)) if isinstance(s, Guard)).body
        )
        assert boundary.crossings == ("_d_next_a",) and "_next_a" in str(boundary.following)
    assert start.checkpoints is None
    assert [s.name for s in done.checkpoints.kept] == ["h"] and str(done.checkpoints.state_rows) == "h"
    assert [c.name for c in done.checkpoints.crossings] == ["_d_next_a"]
    assert changed(start, done) == {"adjoints", "window", "checkpoints"}


def test_aged_adjoints_adds_a_local_adjoint_that_a_flow_reads():
    """In local_flow (tests/support/window_cells.py) dL/dz is local, not recurrent, but the flow into dL/dc_t
    reads dL/dz_{t+1}: it carries an age axis."""
    start, done = applied(local_flow(), aged_adjoints)
    assert "z" not in start.recurrent and "z" in done.recurrent
    assert set(done.recurrent) - set(start.recurrent) == {"z"}
    assert changed(start, done) == {"recurrent"}
