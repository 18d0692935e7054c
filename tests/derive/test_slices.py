"""A slice of a parameter, as torch stacks its gates' weights (examples/torch_lstm.py): its adjoint
lands in its block of the parameter's gradient. Proved exactly against the chain rule over the
unrolled loss, and the generated module against the zoo's LSTM with the same weights unstacked."""

import pathlib

import numpy as np
import pytest
import sympy as sp
from test_exact import assert_every_derivation_agrees, forward_values

from bptt.app.verify.check import check, load_module
from bptt.derive.adjoint import NoRule
from bptt.derive.blocks import Placed, SliceRangeError, split
from bptt.derive.bptt import derive
from bptt.derive.elementwise import Apply
from bptt.derive.model import Model, ModelError, matrix, sequence, sizes
from bptt.derive.models import load
from bptt.derive.nodes import Adj, Diag, SquaredError, T, TimeSum, t, tanh
from bptt.derive.rtrl import forward_mode
from bptt.documents.latex import latex
from bptt.tests.support.brute_force import DIGITS, recorded_gradients
from bptt.tests.support.modules import module_of
from bptt.tests.support.problems import make_problem

EXAMPLE = str(pathlib.Path(__file__).parents[2] / "examples" / "torch_lstm.py") + ":lstm"
GATES = "ifgo"  # torch's order of the stacked blocks


def test_each_block_of_a_stacked_weight_gets_its_gate_s_gradient():
    model = load(EXAMPLE)
    derivation = derive(model, named="textbook")
    W_ih, x = model.params[0], model.inputs[0]
    whole, placed = split(derivation.param_gradient(W_ih))
    assert whole == []
    h = model.sizes[1]
    for k, (gate, block) in enumerate(zip(GATES, placed, strict=True)):
        assert block.block == W_ih[k * h : (k + 1) * h, :]
        bar = next(seq for seq in model.intermediates if seq.name == f"{gate}_bar")
        assert block.value == TimeSum(Adj(bar()) * x().T, t, 1, T)


def test_the_stacked_lstm_agrees_exactly_with_the_chain_rule():
    """At d=2, h=3, q=4, T=3: every entry of W_ih (12 x 2), W_hh, b_ih, b_hh, to 30 digits."""
    case = make_problem(EXAMPLE, 3, seed=5)
    assert_every_derivation_agrees(case, recorded_gradients(case), forward_values(case, DIGITS))


def unstacked(params, n):
    """The zoo lstm's parameters from the stacked ones: W_ii = W_ih[:n], W_if = W_ih[n:2n], ..."""
    out = {"V": params["V"]}
    for k, gate in enumerate(GATES):
        for name in ("W_ih", "W_hh", "b_ih", "b_hh"):
            out[f"{name[0]}_{name[2]}{gate}"] = params[name][k * n : (k + 1) * n]
    return out


@pytest.mark.parametrize("truncate", [None, ("window", 2), ("chunk", 2)])
def test_the_generated_module_is_the_zoo_lstm_with_its_weights_stacked(truncate):
    stacked, zoo = load_module(load(EXAMPLE), from_zoo=False), module_of("lstm")
    rng = np.random.default_rng(0)
    sizes_ = {"d": 2, "h": 3, "q": 4}
    params = stacked.init_params(rng, **sizes_)
    assert params["W_ih"].shape == (12, 2) and params["b_hh"].shape == (12,)
    xs, ys = stacked.random_inputs(rng, 5, 2, **sizes_)
    loss, grads = stacked.loss_and_grads(params, xs, ys, truncate=truncate)
    zoo_loss, zoo_grads = zoo.loss_and_grads(unstacked(params, 3), xs, ys, truncate=truncate)
    assert loss == pytest.approx(zoo_loss, rel=1e-14)
    for name, value in unstacked(grads, 3).items():
        np.testing.assert_allclose(value, zoo_grads[name], rtol=1e-12, atol=1e-14, err_msg=name)
    if truncate is None:
        _, forward_grads = stacked.forward_mode_grads(params, xs, ys)
        for name, value in grads.items():
            np.testing.assert_allclose(forward_grads[name], value, rtol=1e-10, atol=1e-13, err_msg=name)


def test_the_stacked_lstm_passes_the_finite_difference_check():
    rows = check(load_module(load(EXAMPLE), from_zoo=False), steps=4, batch=2)
    assert {row.name for row in rows} == {"W_ih", "W_hh", "b_ih", "b_hh", "V", "h0", "c0"}
    assert all(row.ok for row in rows), rows


def test_a_stacked_parameter_with_a_wrong_height_is_refused():
    stacked = load_module(load(EXAMPLE), from_zoo=False)
    rng = np.random.default_rng(1)
    params = stacked.init_params(rng, d=2, h=3, q=4)
    xs, ys = stacked.random_inputs(rng, 3, 2, d=2, h=3, q=4)
    params["W_ih"] = params["W_ih"][:11]
    with pytest.raises(ValueError, match=r"params\['W_ih'\] has shape \(11, 2\); expected \(4\*h"):
        stacked.loss_and_grads(params, xs, ys)


def test_the_blocks_print_counted_from_one():
    W = matrix("W", 4 * sp.Symbol("h"), 3)
    h = sp.Symbol("h")
    assert latex(W[h : 2 * h, :]) == r"\mathbf{W}[h+1{:}2h,\, :]"
    assert latex(W[:h, 1:3]) == r"\mathbf{W}[1{:}h,\, 2{:}3]"
    assert isinstance(Placed(sp.ZeroMatrix(h, 3), W[:h, :]).shape[0], sp.Mul)


def _model_with(rhs_of):
    d, h = sizes("d h")
    x, state, s, y = (
        sequence(n, size, role)
        for n, size, role in (("x", d, "input"), ("h", h, "state"), ("s", h, "output"), ("y", h, "target"))
    )
    W = matrix("W", 2 * h, h)
    return Model(
        name="m",
        title="m",
        source="test",
        sizes=(d, h),
        params=(W, matrix("U", h, d)),
        inputs=(x,),
        steps=((state, tanh(rhs_of(W, state, h))),),
        outputs=((s, state()),),
        loss=SquaredError(s(), y()),
    )


def test_a_slice_of_a_product_or_with_a_step_has_no_rule():
    stepped = _model_with(lambda W, state, h: W[0 : 2 * h : 2, :] * state(t - 1))
    with pytest.raises(NoRule, match=r"a block takes consecutive rows i:j with 0 <= i < j <= 2\*h and columns k:l"):
        derive(stepped)
    of_product = _model_with(lambda W, state, h: (W.T * W)[:h, :h] * state(t - 1))
    with pytest.raises(NoRule, match="only a block of a parameter"):
        derive(of_product)


def _sliced(d, h):
    """(a sequence's value a_t of 2h rows, a parameter U of h x d)."""
    return sequence("a", 2 * h, "intermediate")(), matrix("U", h, d)


ROWS = "a slice takes consecutive rows i:j with 0 <= i < j <= 2*h"
BLOCK = "a slice takes consecutive rows i:j with 0 <= i < j <= h and columns k:l with 0 <= k < l <= d"
OUT_OF_RANGE = {
    "past": (lambda a, U, h: a[h : 3 * h, :], "the slice a_t[h:3*h, :] ends past the 2*h rows of a_t: " + ROWS),
    "rows": (lambda a, U, h: a[h : 3 * h], "the slice a_t[h:3*h] ends past the 2*h rows of a_t: " + ROWS),
    "empty": (lambda a, U, h: a[h:h, :], "the slice a_t[h:h, :] takes none of the 2*h rows of a_t: " + ROWS),
    "reversed": (
        lambda a, U, h: a[2 * h : h, :],
        "the slice a_t[2*h:h, :] takes none of the 2*h rows of a_t (it ends before it starts): " + ROWS,
    ),
    "backwards": (
        lambda a, U, h: a[::-1, :],
        "the slice a_t[::-1, :] takes none of the 2*h rows of a_t (its step goes back): " + ROWS,
    ),
    "before": (
        lambda a, U, h: a[-3 * h :, :],
        "the slice a_t[-3*h:, :] starts before the first of the 2*h rows of a_t: " + ROWS,
    ),
    "column": (lambda a, U, h: a[:h, 1], "the slice a_t[:h, 1] ends past the one column of a_t: " + ROWS),
    "block": (lambda a, U, h: U[h : 2 * h, :], "the slice U[h:2*h, :] ends past the h rows of U: " + BLOCK),
    "columns": (
        lambda a, U, h: U[:, 1 : 2 * U.shape[1]],
        "the slice U[:, 1:2*d] ends past the d columns of U: " + BLOCK,
    ),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_a_slice_out_of_range_empty_or_reversed_is_refused_as_written_where_it_is_made(case):
    """SymPy raises a bare IndexError for these as the model's function writes them (bptt check said `failed:
    IndexError:` and nothing more): the error names the slice as written, what it does wrong and what a slice
    takes, a ModelError (exit 2) that is still the IndexError SymPy's callers expect."""
    d, h = sizes("d h")
    a, U = _sliced(d, h)
    make, message = OUT_OF_RANGE[case]
    with pytest.raises(SliceRangeError) as caught:
        make(a, U, h)
    assert str(caught.value) == message
    assert isinstance(caught.value, ModelError) and isinstance(caught.value, IndexError)


def test_a_slice_in_range_and_a_key_that_is_no_slice_are_sympy_s_as_before():
    d, h = sizes("d h")
    a, U = _sliced(d, h)
    assert a[-h:, :] == a[h : 2 * h, :] and a[0:d, :].shape == (d, 1)  # undecided by the sizes: SymPy's to take
    with pytest.raises(IndexError, match="Invalid index, wanted"):  # not a slice: SymPy's own words
        U[0, 1, 2]


PAPER_CELLS = pathlib.Path(__file__).parents[1] / "support" / "paper_cells.py"


def test_the_adjoint_of_a_sliced_value_is_its_slices_adjoints_stacked():
    """dL/da_t of a_t read as a_t[1:h] and a_t[2h+1:3h]: each slice's adjoint in its rows, rows h+1..2h zero (no
    term), printed as one stacked column."""
    model = load(f"{PAPER_CELLS}:sliced_gates")
    a = next(seq for seq in model.intermediates if seq.name == "a")
    h = model.sizes[1]
    adjoint = derive(model, named="all").intermediate(a)
    whole, placed = split(adjoint)
    assert whole == []
    assert [p.block for p in placed] == [a()[0:h, :], a()[2 * h : 3 * h, :]]
    printed = latex(adjoint)
    assert printed.startswith(r"\begin{bmatrix} ") and printed.count(r"\mathbf{0}_{h}") == 1, printed


def test_a_state_read_by_slices_has_the_selection_in_its_jacobian():
    """s_t = tanh(W s_{t-1}[1:h] + ...): ds_t/ds_{t-1} = diag(1 - s_t^2) W I[1:h, :], and dL/ds_t stacks the next
    step's adjoint (rows 1..h) over the head's (rows h+1..2h)."""
    model = load(f"{PAPER_CELLS}:sliced_state")
    (state,), (W, *_) = model.states, model.params
    h = model.sizes[1]
    selection = sp.MatrixSlice(sp.Identity(2 * h), (0, h, 1), (0, 2 * h, 1))
    assert forward_mode(model, W).jacobian(state) == sp.MatMul(Diag(1 - sp.HadamardPower(state(), 2)), W, selection)
    _, placed = split(derive(model).recursion(state))
    assert [p.block for p in placed] == [state()[0:h, :], state()[h : 2 * h, :]]


def one_slice():
    """h_t = elu(a_t[h+1:2h]) of a_t = W x_t + U h_{t-1} (2h rows): a value read by one slice only."""
    d, h, q = sizes("d h q")
    x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", 2 * h, "intermediate")
    W, U, V = matrix("W", 2 * h, d), matrix("U", 2 * h, h), matrix("V", q, h)
    s, y = sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name="one-slice",
        title="A value read by one slice",
        source="issue 28",
        sizes=(d, h, q),
        params=(W, U, V),
        inputs=(x,),
        steps=((a, W * x() + U * hidden(t - 1)), (hidden, Apply("elu", a()[h : 2 * h, :]))),
        outputs=((s, V * hidden()),),
        loss=SquaredError(s(), y()),
    )


def test_a_value_read_by_one_slice_keeps_its_adjoint_named():
    """A textbook names dL/da_t of a value read through a slice (the stack of its slices' adjoints) and writes
    U^T dL/da_t, rather than U^T times that stack written out wherever a_t is read (a random cell's a_t read by one
    slice put a block matrix 200 pt wider than the page into dL/dh_t and dL/dW)."""
    model = one_slice()
    a, U = model.intermediates[0], model.params[1]
    derivation = derive(model, named="textbook")
    assert a in derivation.named
    assert derivation.param_gradient(U) == TimeSum(Adj(a()) * model.states[0](t - 1).T, t, 1, T)
