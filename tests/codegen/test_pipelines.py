"""Each backend's own passes (program.py: NUMPY_PASSES, TORCH_PASSES, JAX_PASSES), each Program -> Program, and
what each does to a small Program (the GRU's): halved sigmoids for the backends that compute the gates in place,
the window pass's gate flows as one product with the stacked weights for JAX, which prints that pass."""

import pathlib
from dataclasses import fields, replace

import sympy as sp

from bptt.codegen.backends import BACKENDS
from bptt.codegen.ir import (
    Array,
    Assign,
    Flow,
    Guard,
    Loop,
    Pass,
    Program,
    Steps,
    rewrite,
    spliced,
    the_loop,
    walk,
    with_body,
)
from bptt.codegen.ir_checkpoints import Boundary
from bptt.codegen.passes.fuse_backward import stacked_window
from bptt.codegen.passes.halve import halved_sigmoids
from bptt.codegen.passes.hoist import hoisted_block_slopes
from bptt.codegen.passes.loops import scheduled_backward
from bptt.codegen.passes.scanned import scanned_values
from bptt.codegen.passes.slices import activated_slices
from bptt.codegen.program import JAX_PASSES, NUMPY_PASSES, SHARED_PASSES, TORCH_PASSES, build, shared
from bptt.derive.blocks import Placed
from bptt.derive.elementwise import Apply
from bptt.derive.models import load, names
from bptt.derive.nodes import Adj, Diag, SeqAt, t

GENERATED = pathlib.Path(__file__).resolve().parents[2] / "generated"
HERE = pathlib.Path(__file__).resolve().parent


def changed_fields(before, after):
    """The names of the Program's fields a pass changed."""
    return {f.name for f in fields(Program) if getattr(before, f.name) != getattr(after, f.name)}


def loop_body(a_pass):
    (loop,) = [s for s in a_pass.statements if isinstance(s, Loop)]
    return list(walk(loop.body))


def functions(statements):
    """The elementwise functions the statements' values apply."""
    return {node.function for s in statements for node in sp.preorder_traversal(s.value) if isinstance(node, Apply)}


def test_each_backend_has_its_own_list_of_program_passes():
    program = shared(load("gru"))
    for passes in (NUMPY_PASSES, TORCH_PASSES, JAX_PASSES):
        for one in passes:
            assert isinstance(one(program), Program), one
    assert halved_sigmoids in NUMPY_PASSES and halved_sigmoids not in JAX_PASSES
    assert JAX_PASSES == (stacked_window, scanned_values)
    assert build(load("gru"), JAX_PASSES) == scanned_values(stacked_window(program))


def test_every_pass_of_every_list_has_its_own_test():
    """A pass in a pipeline list is tested on its own: a test named after it (test_<pass>_...) here or in
    tests/codegen/passes/, and every pass is Program -> Program (shared(model) is derived(model) rewritten
    by SHARED_PASSES)."""
    tests = [HERE / "test_pipelines.py", *sorted((HERE / "passes").glob("test_*.py"))]
    text = "\n".join(path.read_text(encoding="utf-8") for path in tests)
    for one in dict.fromkeys(SHARED_PASSES + NUMPY_PASSES + TORCH_PASSES + JAX_PASSES):
        assert f"def test_{one.__name__}_" in text, one.__name__


def test_halved_sigmoids_before_and_after():
    """The forward loop's gate sigmoids become one tanh of the halved pre-activations and a scaling; the
    weights and biases of the halved gates are stacked halved; nothing but the forward pass changes."""
    before = shared(load("gru"))
    after = halved_sigmoids(before)
    assert "sigmoid" in functions(loop_body(before.forward))
    assert "sigmoid" not in functions(loop_body(after.forward)) and "tanh" in functions(loop_body(after.forward))
    assert not [s for s in before.forward.stacks if s.name.endswith("_halved")]
    stacks = {s.name: s.parts for s in after.forward.stacks}
    params = {p.name: p for p in before.model.params}
    assert stacks["_W_hr_W_hz_W_hn_halved"] == (params["W_hr"] / 2, params["W_hz"] / 2, params["W_hn"])
    assert changed_fields(before, after) == {"forward"}


def test_activated_slices_before_and_after():
    """The LayerNorm-LSTM's f, i, o = sigmoid(a_t[:h]), sigmoid(a_t[h:2h]), sigmoid(a_t[2h:3h]) become one sigmoid of
    a_t[:3h] into the span _f_i_o of a group _f_i_o_g whose members are f, i, o, g (g's tanh stays its own
    statement); the four arrays leave the forward Pass for the group; nothing but the forward pass changes. The
    LSTM, whose gates are a group already, is left as it is."""
    before = shared(load("lstm-layernorm"))
    after = activated_slices(before)
    h = next(seq for seq in before.model.states if seq.name == "h").rows
    sigmoids = [s for s in loop_body(after.forward) if isinstance(s.value, Apply) and s.value.function == "sigmoid"]
    assert len([s for s in loop_body(before.forward) if getattr(s.value, "function", "") == "sigmoid"]) == 3
    (fio,) = sigmoids
    assert fio.target.name == "_f_i_o" and fio.value.arg.rowslice == (0, 3 * h, 1)
    (group,) = [a for a in after.forward.arrays if a.members]
    assert group.name == "_f_i_o_g" and [m for m, _ in group.members] == ["f", "i", "o", "g"]
    assert group.spans == (("_f_i_o", 0, 3),) and not {"f", "i", "o", "g"} & {a.name for a in after.forward.arrays}
    assert changed_fields(before, after) == {"forward"}
    lstm = shared(load("lstm"))
    assert activated_slices(lstm) == lstm


def test_hoisted_block_slopes_before_and_after():
    """The LayerNorm-LSTM's dL/da_t places each gate's adjoint in its rows of a_t (blocks.Placed): the gates'
    slopes inside those blocks ((1 - f_t) * c_{t-1} * f_t, ...) become arrays _b1.._b4 before the loop, as other
    gates' slopes do in the shared hoisted_factors, and each block reads one stored diag factor; nothing but the
    adjoints changes. The LSTM, whose adjoints have no such blocks, is left as it is."""
    before = shared(load("lstm-layernorm"))
    after = hoisted_block_slopes(before)

    def computed_slopes(program):
        blocks = [p for s in loop_body(program.adjoints) if hasattr(s, "value") for p in s.value.atoms(Placed)]
        return [d for p in blocks for d in p.value.atoms(Diag) if not isinstance(d.vector, SeqAt)], len(blocks)

    slopes, blocks = computed_slopes(before)
    assert blocks == 4 and slopes and computed_slopes(after) == ([], 4)
    assert {"_b1", "_b2", "_b3", "_b4"} <= {a.name for a in after.adjoints.arrays}
    assert changed_fields(before, after) == {"adjoints"}
    lstm = shared(load("lstm"))
    assert hoisted_block_slopes(lstm) == lstm


def adjoint_names(statements):
    return [s.target.of.name for s in statements if isinstance(getattr(s, "target", None), Adj)]


def test_scheduled_backward_before_and_after():
    """The LayerNorm-LSTM's dL/d(W_x x_t) and its norm's dL/d(x̂), which only W_x's gradient reads, leave the
    backward loop for after it (all steps at once), in their order; dL/d(W_h h_{t-1}), which the flow into dL/dh_t
    reads, and the LSTM's gates (members of a group the flow reads) stay; nothing but the adjoints changes."""
    before = shared(load("lstm-layernorm"))
    after = scheduled_backward(before)
    moved = ["a2_in_hat", "a2_in"]
    assert set(moved) <= set(adjoint_names(loop_body(before.adjoints)))
    assert not set(moved) & set(adjoint_names(loop_body(after.adjoints)))
    (loop,) = [s for s in after.adjoints.statements if isinstance(s, Loop)]
    tail = after.adjoints.statements[after.adjoints.statements.index(loop) + 1 :]
    assert adjoint_names(tail) == moved and {"a1_in", "a"} <= set(adjoint_names(loop_body(after.adjoints)))
    assert changed_fields(before, after) == {"adjoints"}
    lstm = shared(load("lstm"))
    assert scheduled_backward(lstm) == lstm


def test_stacked_window_before_and_after():
    """The window pass's flow into dL/dh_t through the three gates' weights becomes one product with their
    stack and the gates' adjoints side by side (a group of the Pass), dL/dh_0 too; the boundaries cross the
    group; nothing else changes."""
    before = shared(load("gru"))
    after = stacked_window(before)

    def flow(program):
        (statement,) = [s for s in loop_body(program.window) if isinstance(s, Flow)]
        return statement.value

    def products(value):
        return [term for term in value.args if isinstance(term, sp.MatMul) and isinstance(term.args[0], sp.Transpose)]

    assert len(products(flow(before))) == 3 and before.window.arrays == ()
    (product,) = products(flow(after))
    assert product.args[0].arg.name == "_W_hr_W_hz_W_hn" and isinstance(product.args[1], Adj)
    (group,) = after.window.arrays
    assert group.name == "_d_r_bar_z_bar_m" and [m for m, _ in group.members] == ["d_r_bar", "d_z_bar", "d_m"]
    assert [s.name for s in after.window.stacks] == ["_W_hr_W_hz_W_hn"]
    assert len(products(after.window_initial[0].value)) == 1
    crossings = {c.name for c in after.checkpoints.window_crossings}
    assert "_d_next_r_bar_z_bar_m" in crossings and "_d_next_m" not in crossings
    assert changed_fields(before, after) == {"window", "window_initial", "checkpoints"}
    assert after.checkpoints.crossings == before.checkpoints.crossings  # the fast pass's own, untouched


def test_scanned_values_before_and_after():
    """The forward arrays that hold no state hold steps 1..T, what a scan stacks (the GRU's gates and n; the
    Jordan network's h, computed for all steps at once); a state (read at t-1, its step 0 the initial state) keeps
    steps 0..T, and so does any array a pass reads at t-1; nothing but the forward pass's arrays changes."""
    before = shared(load("gru"))
    after = scanned_values(before)
    steps = {array.name: array.steps for array in after.forward.arrays}
    assert {array.steps for array in before.forward.arrays if array.name != "s"} == {Steps.FROM_ZERO}
    assert steps == {"_r_z_m": Steps.FROM_ONE, "n": Steps.FROM_ONE, "h": Steps.FROM_ZERO, "s": Steps.FROM_ONE}
    assert changed_fields(before, after) == {"forward"} and after.forward.statements == before.forward.statements
    jordan = {array.name: array.steps for array in scanned_values(shared(load("jordan"))).forward.arrays}
    assert jordan == {"o": Steps.FROM_ZERO, "h": Steps.FROM_ONE, "s": Steps.FROM_ONE}
    read = replace(before.forward, arrays=(*before.forward.arrays, Array("a", sp.Symbol("h"))))
    h = sp.Symbol("h")
    late = Assign(SeqAt("s", t, h, "output"), SeqAt("a", t - 1, h, "intermediate"), "reads a at t-1")
    read = replace(read, statements=(*read.statements, late))
    kept = {array.name: array.steps for array in scanned_values(replace(before, forward=read)).forward.arrays}
    assert kept["a"] is Steps.FROM_ZERO and kept["n"] is Steps.FROM_ONE


def test_no_jax_module_carries_halved_sigmoids():
    """Halved sigmoids pay in NumPy's in-place code; JAX's modules compute sigmoid(z) as it is."""
    for name in names():
        jax_source = (GENERATED / BACKENDS["jax"].filename(name)).read_text(encoding="utf-8")
        assert "_halved" not in jax_source, name
    assert "_halved" in (GENERATED / BACKENDS["numpy"].filename("gru")).read_text(encoding="utf-8")


def test_rewrite_opens_every_loop_and_guard_and_keeps_what_they_are():
    """ir.rewrite, the passes' loop-body recursion: every statement outside a Loop or Guard through leaf, at any
    depth; a backward Loop stays backward and a Boundary keeps its following statements and crossings; guard
    sees each Guard rebuilt."""
    h = sp.Symbol("h")
    a, b, c = (SeqAt(name, t, h, "intermediate") for name in "abc")
    boundary = Boundary((Flow(a, b, "flow"),), following=(Flow(a, c, "next"),), crossings=("_next_b",))
    statements = (Assign(c, a, "before"), Loop((Assign(b, a, "inside"), boundary), backward=True))

    def marked(statement):
        return replace(statement, comment=statement.comment + "!")

    done = rewrite(statements, marked)
    assert [s.comment for s in walk(done) if hasattr(s, "comment")] == ["before!", "inside!", "flow!"]
    (loop,) = [s for s in done if isinstance(s, Loop)]
    assert loop.backward and isinstance(loop.body[1], Boundary)
    assert loop.body[1].following == boundary.following and loop.body[1].crossings == ("_next_b",)
    plain = rewrite(statements, guard=lambda guard: Guard(guard.body))
    assert type(plain[1].body[1]) is Guard and plain[1].body[1].body == boundary.body
    assert rewrite(statements) == statements


def test_a_pass_rebuilds_its_loop_in_place():
    """ir.the_loop finds a Pass's loop, ir.with_body replaces its body (a backward loop stays backward) and
    ir.spliced puts statements in its place, by identity: the passes' way of rewriting the loop as a whole."""
    h = sp.Symbol("h")
    a, b = (SeqAt(name, t, h, "intermediate") for name in "ab")
    first, inside = Assign(a, b, "first"), Assign(b, a, "inside")
    loop = Loop((inside,), backward=True)
    a_pass = Pass((first, loop, first))
    assert the_loop(a_pass.statements) is loop and the_loop((first,)) is None
    again = Assign(b, a + a, "again")
    rebuilt = with_body(a_pass, [inside, again])
    assert rebuilt.statements == (first, Loop((inside, again), backward=True), first)
    assert spliced(a_pass.statements, loop, [again, loop]) == (first, again, loop, first)
