"""Each forward pass of the shared pipeline (codegen/program.py: SHARED_PASSES) on a zoo cell's Program: the
Program it starts from, the pass applied, what it changed, and that nothing else changed."""

from dataclasses import fields

import sympy as sp

from bptt.codegen.ir import Accumulate, Assign, Program, the_loop
from bptt.codegen.passes.collect import collected_products
from bptt.codegen.passes.fuse import fused_activations, fused_products, stacked_inputs
from bptt.codegen.passes.hoist import hoisted_terms
from bptt.codegen.passes.inline import cached_values, inlined_values
from bptt.codegen.passes.loops import scheduled_forward
from bptt.codegen.passes.split import split_activations
from bptt.derive.elementwise import Apply
from bptt.derive.models import load
from bptt.derive.nodes import SeqAt, t, tanh
from bptt.tests.support.passes import after_loop, before, in_loop, named, outside_loop

XDIST_GROUP = "passes"  # one worker derives each cell once for every pass's test


def applied(name, one):
    """(the Program `one` starts from for the zoo cell `name`, the Program after it)."""
    start = before(load(name), one)
    return start, one(start)


def seqs(model):
    """{name: Seq} of a model's inputs, steps and outputs."""
    return {seq.name: seq for seq in (*model.inputs, *(seq for seq, _ in model.steps + model.outputs))}


def changed(start, done):
    return {f.name for f in fields(Program) if getattr(start, f.name) != getattr(done, f.name)}


def test_cached_values_keeps_what_backward_reads():
    """Elman's backward reads h (dL/dh's slope 1 - h_t^2) and not a: forward keeps the input and h."""
    start, done = applied("elman", cached_values)
    assert start.cache == ("x",) and done.cache == ("x", "h")
    assert changed(start, done) == {"cache"}


def test_inlined_values_computes_an_uncached_value_in_its_reader():
    """Elman's a_t, read once (by h_t) and not cached, is computed inside h_t = tanh(a_t), and has no array."""
    start, done = applied("elman", inlined_values)
    assert [s.target.name for s in in_loop(start.forward)] == ["a", "h", "s"]
    assert [s.target.name for s in in_loop(done.forward)] == ["h", "s"]
    a_value = named(in_loop(start.forward))["a"].value
    assert named(in_loop(done.forward))["h"].value == tanh(a_value)
    assert [a.name for a in done.forward.arrays] == ["h", "s"]
    assert changed(start, done) == {"forward"}


def test_scheduled_forward_loops_over_the_recursion_only():
    """Elman's output s_t reads no state of the step before: computed after the loop, for all steps at once."""
    start, done = applied("elman", scheduled_forward)
    assert [s.target.name for s in in_loop(start.forward)] == ["h", "s"]
    assert [s.target.name for s in in_loop(done.forward)] == ["h"]
    assert [s.target.name for s in after_loop(done.forward)] == ["s"]
    assert changed(start, done) == {"forward"}


def test_scheduled_forward_drops_the_loop_when_no_value_reads_the_step_before():
    """Jordan's state reads the teacher-forced label o_{t-1}, which is data: nothing recurs, so every value is
    computed for all steps at once, after the teacher-forced one, and there is no loop."""
    start, done = applied("jordan", scheduled_forward)
    assert [s.target.name for s in in_loop(start.forward)] == ["h", "s"]
    assert the_loop(done.forward.statements) is None
    assert [s.target.name for s in done.forward.statements] == ["o", "h", "s"]
    assert changed(start, done) == {"forward"}


def test_fused_products_makes_one_product_of_the_gates():
    """The LSTM's four products W_h* h_{t-1} become one Accumulate into the gates' group with their weights
    stacked; the gates' arrays become the group's members; no gate reads a W_h* any more."""
    start, done = applied("lstm", fused_products)
    (product,) = [s for s in in_loop(done.forward) if isinstance(s, Accumulate)]
    assert product.target.name == "_i_f_o_g" and product.value.args[1] == seqs(start.model)["h"](t - 1)
    (stack,) = done.forward.stacks
    assert product.value.args[0].name == stack.name and [p.name for p in stack.parts] == [
        "W_hi",
        "W_hf",
        "W_ho",
        "W_hg",
    ]
    group = done.forward.arrays[0]
    assert [m for m, _ in group.members] == ["i", "f", "o", "g"]
    assert not {"i", "f", "g", "o"} & {a.name for a in done.forward.arrays}
    gates = [s for s in in_loop(done.forward) if isinstance(s, Assign) and s.target.name in "ifgo"]
    assert len(gates) == 4 and not any(p in s.value.free_symbols for s in gates for p in stack.parts)
    assert not any(isinstance(s, Accumulate) for s in in_loop(start.forward)) and start.forward.stacks == ()
    assert changed(start, done) == {"forward"}


def test_hoisted_terms_computes_what_reads_no_loop_value_before_the_loop():
    """Elman's b + U x_t is computed for all steps before the loop into h's array; the loop adds W h_{t-1}."""
    start, done = applied("elman", hoisted_terms)
    assert outside_loop(start.forward) == []
    (hoisted,) = outside_loop(done.forward)
    params = {p.name: p for p in start.model.params}
    h, x = seqs(start.model)["h"], seqs(start.model)["x"]
    assert hoisted.target == h() and hoisted.value == params["U"] * x() + params["b"]
    (step,) = in_loop(done.forward)
    assert step.value == tanh(params["W"] * h(t - 1) + h())
    assert changed(start, done) == {"forward"}


def test_split_activations_adds_a_gates_own_terms_before_its_activation():
    """The peephole LSTM's i_t = sigmoid(p_i * c_{t-1} + i_t) becomes i_t += p_i * c_{t-1}, then i_t = sigmoid(i_t),
    right after the fused product (what it reads, c_{t-1}, is there before the step)."""
    start, done = applied("lstm-peephole", split_activations)
    body = in_loop(done.forward)
    added = [s for s in body if isinstance(s, Accumulate) and s.target.name == "i"]
    assert len(added) == 1 and str(added[0].value) == "HadamardProduct(p_i, c_{t-1})"
    activation = next(s for s in body if isinstance(s, Assign) and s.target.name == "i")
    assert activation.value == Apply("sigmoid", activation.target)
    assert body.index(added[0]) < body.index(activation) and isinstance(body[body.index(added[0]) - 1], Accumulate)
    assert not [s for s in in_loop(start.forward) if isinstance(s, Accumulate) and s.target.name == "i"]
    assert changed(start, done) == {"forward"}


def test_fused_activations_applies_one_sigmoid_to_neighbouring_gates():
    """The LSTM's sigmoids of i, f and o (neighbours in the group) become one on their span _i_f_o."""
    start, done = applied("lstm", fused_activations)

    def sigmoids(a_pass):
        return [
            s.target.name for s in in_loop(a_pass) if isinstance(s, Assign) and s.value == Apply("sigmoid", s.target)
        ]

    assert sigmoids(start.forward) == ["i", "f", "o"] and sigmoids(done.forward) == ["_i_f_o"]
    assert done.forward.arrays[0].spans == (("_i_f_o", 0, 3),)
    assert changed(start, done) == {"forward"}


def test_stacked_inputs_makes_one_product_of_the_gates_hoisted_terms():
    """The LSTM's four hoisted W_i* x_t + b_h* + b_i* become one statement on the group: the input weights
    stacked, and each gate's two biases summed and stacked."""
    start, done = applied("lstm", stacked_inputs)
    assert len([s for s in outside_loop(start.forward) if s.target.name in "ifgo"]) == 4
    (stacked,) = outside_loop(done.forward)
    assert stacked.target.name == "_i_f_o_g"
    stacks = {s.name: s.parts for s in done.forward.stacks}
    assert [p.name for p in stacks["_W_ii_W_if_W_io_W_ig"]] == ["W_ii", "W_if", "W_io", "W_ig"]
    assert str(stacks["_b_i_f_o_g"][0]) == "b_hi + b_ii"
    read = stacked.value.atoms(sp.MatrixSymbol) | stacked.value.atoms(SeqAt)
    assert {s.name for s in read} == {"_W_ii_W_if_W_io_W_ig", "_b_i_f_o_g", "x"}
    assert changed(start, done) == {"forward"}


def test_collected_products_writes_the_grus_update_with_fewer_operations():
    """The GRU's h_t = (1 - z_t) * n_t + h_{t-1} * z_t becomes n_t + z_t * (h_{t-1} - n_t)."""
    start, done = applied("gru", collected_products)
    h, n, z = (seqs(start.model)[name] for name in "hnz")
    before_value = sp.HadamardProduct(1 - z(), n()) + sp.HadamardProduct(h(t - 1), z())
    assert named(in_loop(start.forward))["h"].value == before_value
    assert named(in_loop(done.forward))["h"].value == sp.HadamardProduct(h(t - 1) - n(), z()) + n()
    assert changed(start, done) == {"forward"}
