"""Forward mode's tangents are named quantities of the step, as BPTT's adjoints are: each is assigned in
the step's order and written through the tangents assigned before it (dot_c_t in dot_h_t, layer 1's
dot_h1_t in layer 2's gates), so none is longer than its own equation. One loop carries the directions of
every gradient at once. Cells that exercise the order: a state's tangent at t - 1 read after its own at t
(ir_tangents.Previous), and a state that reads no past, whose initial value's directions live one step only.
"""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp
import torch
from test_forward_mode_ir import problem, relative, run_forward_mode

from bptt.app.verify.check import load_module
from bptt.codegen import ir, ir_tangents
from bptt.codegen.backends import BACKENDS
from bptt.codegen.program import build
from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.models import load
from bptt.derive.nodes import SeqAt, SquaredError, t, tanh
from bptt.derive.tangent import Tangent
from bptt.documents.derived import derived
from bptt.documents.forward_document import forward_mode_sections
from bptt.documents.latex import latex
from bptt.tests.support.zoo import supporting

jax.config.update("jax_enable_x64", True)

CELLS = pathlib.Path(__file__).parents[1] / "support" / "user_cells.py"
EVERY_BACKEND = tuple(sorted(BACKENDS))


def loop_of(model):
    (loop,) = [s for s in build(model).forward_mode.statements if isinstance(s, ir_tangents.TangentLoop)]
    return loop


def read(expr):
    """What the tangents in expr are of: 'W' for a parameter (or a block of it), ('h', -1) for h_{t-1}."""
    return {(d.of.name, int(d.of.time - t)) if isinstance(d.of, SeqAt) else d.of.name for d in expr.atoms(Tangent)}


def assigned(loop):
    return list(dict.fromkeys(s.target.of.name for s in loop.body if isinstance(s, ir.Assign)))


def through(loop, name):
    """What the statements of a tangent read besides its own value and its local terms."""
    values = [s.value for s in loop.body if isinstance(s, ir.Assign) and s.target.of.name == name]
    return set().union(*(read(value) for value in values)) - {(name, 0)}


@pytest.mark.parametrize("name", [*supporting("forward_mode_grads"), f"{CELLS}:lstm2_stacked"])
def test_a_tangent_reads_only_tangents_already_there(name):
    """Each tangent read is a carried state's at t - 1 or one assigned earlier in the same step (or, in its own
    statements, the value it holds already); a local term reads only its own parameter's."""
    loop = loop_of(load(name))
    before = {(a.state.name, -1) for a in loop.arrays}
    for statement in loop.body:
        if isinstance(statement, ir_tangents.AddAlong):
            assert read(statement.value) == {statement.along.key}, statement
        elif isinstance(statement, (ir.Assign, ir_tangents.Contract)):
            value = statement.value if isinstance(statement, ir.Assign) else statement.tangent
            own = {(statement.target.of.name, 0)} if isinstance(statement, ir.Assign) else set()
            params = {d.key for d in loop.directions if not d.per_sample}
            assert read(value) <= before | own | params, statement
        if isinstance(statement, ir.Assign):
            before.add((statement.target.of.name, 0))


def test_a_two_layer_lstm_writes_layer_two_through_layer_one():
    """Layer 2's gates read h1's tangent at t, not its terms; h2's reads c2's and o2's. No tangent of layer 1
    has a local term along a layer-2 weight."""
    loop = loop_of(load(f"{CELLS}:lstm2_stacked"))
    order = assigned(loop)
    assert order.index("h1") < order.index("i2_bar") < order.index("c2") < order.index("h2")
    assert through(loop, "i2_bar") == {("h1", 0), ("h2", -1)}
    assert through(loop, "h2") == {("c2", 0), ("o2", 0)}
    assert through(loop, "c2") == {("c2", -1), ("f2", 0), ("g2", 0), ("i2", 0)}
    layer_one = {name for name in order if name.endswith("1") or name.endswith("1_bar")}
    for add in (s for s in loop.body if isinstance(s, ir_tangents.AddAlong)):
        if add.along.key.endswith("2"):
            assert add.target.of.name not in layer_one, add


def test_the_generated_forward_mode_stays_small():
    """The NumPy module of the two-layer LSTM: no line of forward_mode_grads is longer than 120 characters
    (fully expanded, layer 2's tangents ran to 25,000 characters), and it has one loop over time."""
    source = BACKENDS["numpy"].module_source(load(f"{CELLS}:lstm2_stacked"))
    body = source[
        source.index("def forward_mode_grads") : source.index("\ndef ", source.index("def forward_mode_grads"))
    ]
    assert max(len(line) for line in body.splitlines()) <= 120
    assert body.count("for t in range") == 1


def test_the_document_writes_h_dot_through_c_dot():
    """lstm-peephole's forward-mode section: h_dot_t is written through c_dot_t, not along W_z itself."""
    model = load("lstm-peephole")
    c, h = model.states
    W_z = model.params[0]
    section = forward_mode_sections(derived(model))[0]
    h_dots = [e.rhs for e in section.equations if e.lhs == latex(Tangent(h()))]
    assert h_dots and all(latex(Tangent(c())) in rhs for rhs in h_dots)
    assert latex(Tangent(W_z)) not in h_dots[0]


def _cell(name, steps, params, x, state, dims):
    d, h, q = dims
    V, s, y = matrix("V", q, h), sequence("s", q, "output"), sequence("y", q, "target")
    return Model(
        name=name,
        title=name,
        source="a test's cell",
        sizes=dims,
        params=(*params, V),
        inputs=(x,),
        steps=tuple(steps),
        outputs=((s, V * state()),),
        loss=SquaredError(s(), y()),
    )


def reread():
    """h_t reads c_t and c_{t-1}: c's tangent at t - 1 is still needed after c's at t is assigned."""
    d, h, q = sizes("d h q")
    x, c, hidden = sequence("x", d, "input"), sequence("c", h, "state"), sequence("h", h, "state")
    W, U, R, S = matrix("W", h, d), matrix("U", h, h), matrix("R", h, h), matrix("S", h, h)
    steps = [(c, tanh(W * x() + U * hidden(t - 1))), (hidden, tanh(R * c() + S * c(t - 1)))]
    return _cell("reread", steps, [W, U, R, S], x, hidden, (d, h, q))


def fresh():
    """m_t = tanh(W x_t) reads no past, but h_t reads m_{t-1}: m_0's direction enters step 1 only."""
    d, h, q = sizes("d h q")
    x, m, hidden = sequence("x", d, "input"), sequence("m", h, "state"), sequence("h", h, "state")
    W, U, R = matrix("W", h, d), matrix("U", h, h), matrix("R", h, h)
    steps = [(hidden, tanh(U * hidden(t - 1) + R * m(t - 1))), (m, tanh(W * x()))]
    return _cell("fresh", steps, [W, U, R], x, hidden, (d, h, q))


def test_the_order_cells_have_their_statements():
    """reread keeps c's tangent at t - 1 (Previous) and reads it after assigning c's at t; fresh's m reads no
    past, so m's tangent starts as the directions of m_0 and is assigned without them (no term through m_{t-1})."""
    loop = loop_of(reread())
    assert [s.state.name for s in loop.body if isinstance(s, ir_tangents.Previous)] == ["c"]
    assert isinstance(loop.body[0], ir_tangents.Previous)
    assert ("c", -1) in through(loop, "h")
    loop = loop_of(fresh())
    m = next(a for a in loop.arrays if a.state.name == "m")
    assert m.own is not None and m.own.key == "m0"
    assert through(loop, "m") == set() and ("m", -1) in through(loop, "h")


def own_bptt(module, backend, arrays):
    """The backend module's own loss_and_grads, as (loss, {key: NumPy array})."""
    params, xs, ys, initial = arrays
    convert = {"numpy": np.asarray, "torch": torch.from_numpy, "jax": jnp.asarray}[backend]
    to = lambda tree: {key: convert(value) for key, value in tree.items()}  # noqa: E731
    loss, grads = module.loss_and_grads(to(params), convert(xs), convert(ys), **to(initial))
    return float(loss), {key: np.asarray(value) for key, value in grads.items()}


def forward_mode_errors(model, backends=EVERY_BACKEND, steps=4, batch=3):
    """{backend: the largest relative error of forward_mode_grads against that module's own BPTT}."""
    arrays = problem(load_module(model, from_zoo=False), steps=steps, batch=batch)
    errors = {}
    for backend in backends:
        module = load_module(model, from_zoo=False, backend=backend)
        expected_loss, expected = own_bptt(module, backend, arrays)
        loss, grads = run_forward_mode(module, backend, arrays)
        assert set(grads) == set(expected), backend
        errors[backend] = max([relative(grads[k], expected[k]) for k in expected] + [relative(loss, expected_loss)])
    return errors


@pytest.mark.parametrize("cell", [reread, fresh])
def test_the_order_cells_forward_mode_equals_bptt(cell):
    """Control for both cells: forward mode gives BPTT's loss and gradients in every backend, to 1e-12
    (before the tangents were named, fresh's m_0 direction stayed in every step: errors of order 1)."""
    errors = forward_mode_errors(cell())
    assert max(errors.values()) <= 1e-12, errors


@pytest.mark.slow
@pytest.mark.parametrize("cell, backends", [("lstm2_stacked", EVERY_BACKEND), ("lstm2_gates", EVERY_BACKEND)])
def test_two_layer_lstm_forward_mode_equals_bptt(cell, backends):
    """The two-layer LSTMs of tests/support/user_cells.py: forward mode equals each backend's own BPTT to 1e-12
    (whether that backend's forward pass is right is test_oracle_cells.py's question). JAX compiles one scan
    for all the gradients (it compiled one per gradient: the per-gate cell's 37 were too slow to test)."""
    errors = forward_mode_errors(load(f"{CELLS}:{cell}"), backends, steps=3, batch=2)
    assert max(errors.values()) <= 1e-12, errors


def test_read_names_what_a_tangent_is_of():
    """The helper these tests rest on: a parameter's name, a sequence's (name, offset)."""
    model = load("elman")
    (h,) = model.states
    W = next(p for p in model.params if p.name == "W")
    expr = sp.MatAdd(Tangent(W) * h(t - 1), W * Tangent(h(t - 1)))
    assert read(expr) == {"W", ("h", -1)}
