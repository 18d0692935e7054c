"""Forward mode (RTRL) is IR: codegen/passes/forward_mode.py builds statements (ir_tangents.py: Units, one
TangentLoop, a Gradient per key) into the Program once, and every backend prints the Program's statements. A
planted change in those statements shows up in every backend's generated forward_mode_grads, so a backend that
printed its own forward mode again would fail here. And the users' cells of examples/ give BPTT's gradients by
forward mode in every backend, to 1e-12."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import ast
import dataclasses
import pathlib
import types

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp
import torch

from bptt.app.verify.check import load_module
from bptt.codegen import ir, ir_tangents
from bptt.codegen.backends import BACKENDS
from bptt.codegen.ir import Pass
from bptt.codegen.passes import forward_mode
from bptt.codegen.program import build
from bptt.derive.models import load
from bptt.derive.tangent import Tangent
from bptt.tests.support.zoo import supporting

jax.config.update("jax_enable_x64", True)

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = [f"{ROOT / 'examples' / 'gated_rnn.py'}:gated_rnn", f"{ROOT / 'examples' / 'lstm.py'}:lstm"]
EXAMPLES.append(f"{ROOT / 'examples' / 'torch_lstm.py'}:lstm")
STEP_STATEMENTS = (ir_tangents.Previous, ir.Assign, ir_tangents.AddAlong, ir_tangents.Contract)


def problem(module, seed=5, steps=4, batch=3):
    """Parameters, inputs, targets and non-zero initial states of distinct small sizes (2, 3, 4, ...)."""
    rng = np.random.default_rng(seed)
    sizes = {size: 2 + k for k, size in enumerate(module.SIZES)}
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, **sizes)
    initial = {key: 0.5 * rng.standard_normal((batch, sizes[size])) for key, size in module.STATES.items()}
    return params, xs, ys, initial


def run_forward_mode(module, backend, arrays):
    """module.forward_mode_grads on the backend's arrays, as (loss, {key: NumPy array})."""
    params, xs, ys, initial = arrays
    convert = {"numpy": np.asarray, "torch": torch.from_numpy, "jax": jnp.asarray}[backend]
    to = lambda tree: {key: convert(value) for key, value in tree.items()}  # noqa: E731
    loss, grads = module.forward_mode_grads(to(params), convert(xs), convert(ys), **to(initial))
    return float(loss), {key: np.asarray(value) for key, value in grads.items()}


def relative(got, expected):
    return float(np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-300))


@pytest.mark.parametrize("name", supporting("forward_mode_grads"))
def test_forward_mode_is_statements_in_the_program(name):
    """The Program holds forward mode as typed statements holding SymPy expressions: Units, one TangentLoop
    over time for every gradient, then a Gradient (or ZeroGradient) per key in the order of loss_and_grads';
    no code in them, only comments."""
    model = load(name)
    statements = build(model).forward_mode.statements
    units = [s for s in statements if isinstance(s, ir_tangents.Units)]
    (loop,) = [s for s in statements if isinstance(s, ir_tangents.TangentLoop)]
    grads = statements[len(units) + 1 :]
    assert units and statements[len(units)] is loop
    assert all(isinstance(g, (ir_tangents.Gradient, ir_tangents.ZeroGradient)) for g in grads)
    keys = [p.name for p in model.params] + [f"{s.name}0" for s in model.states]
    assert [g.direction.key if isinstance(g, ir_tangents.Gradient) else g.key for g in grads] == keys
    assert sorted(d.key for d in loop.directions) == sorted(
        g.direction.key for g in grads if isinstance(g, ir_tangents.Gradient)
    )
    assert all(isinstance(s, STEP_STATEMENTS) for s in loop.body), name
    contracts = [s for s in loop.body if isinstance(s, ir_tangents.Contract)]
    assert contracts and all(isinstance(c.tangent, sp.MatrixExpr) for c in contracts)
    for assign in (s for s in loop.body if isinstance(s, (ir.Assign, ir_tangents.AddAlong))):
        assert isinstance(assign.value, sp.MatrixExpr) and isinstance(assign.target, Tangent)
        assert "np." not in assign.comment


@pytest.mark.parametrize("name", ["elman", "lstm"])
def test_a_local_term_goes_into_its_parameters_rows(name):
    """Each parameter's local term is added into its own rows (ir_tangents.AddAlong) and reads the tangent of that
    parameter only; the terms through other tangents are assigned for every direction at once."""
    model = load(name)
    (loop,) = [s for s in build(model).forward_mode.statements if isinstance(s, ir_tangents.TangentLoop)]
    adds = [s for s in loop.body if isinstance(s, ir_tangents.AddAlong)]
    carried = {d.wrt for d in loop.directions[: loop.carried] if not d.per_sample}
    assert {add.along.wrt for add in adds} == carried  # every carried parameter has its local term, once
    assert len(adds) == len(carried)
    for add in adds:
        assert {d.of for d in add.value.atoms(Tangent)} == {add.along.wrt}


def test_forward_mode_module_prints_nothing():
    """codegen/passes/forward_mode.py builds the statements the Program holds: it imports the derivation, the
    IR and the text of comments, no printer."""
    model = load("elman")
    assert forward_mode.statements(model) == build(model).forward_mode.statements
    tree = ast.parse((ROOT / "codegen" / "passes" / "forward_mode.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    allowed = {"bptt.derive.atoms", "bptt.derive.nodes", "bptt.derive.rtrl", "bptt.derive.tangent", "bptt.derive.text"}
    allowed |= {"bptt.codegen.ir", "bptt.codegen.ir_tangents"}
    assert imported <= allowed, imported


def planted(program):
    """The program with the contraction of c's local term doubled, and the loop's comment marked."""

    def plant(statement):
        if isinstance(statement, ir_tangents.Contract) and statement.along is not None and statement.along.key == "c":
            return dataclasses.replace(statement, tangent=2 * statement.tangent)
        return statement

    def plant_loop(statement):
        if not isinstance(statement, ir_tangents.TangentLoop):
            return statement
        body = tuple(plant(s) for s in statement.body)
        return dataclasses.replace(statement, body=body, comment="PLANTED: c doubled")

    statements = tuple(plant_loop(s) for s in program.forward_mode.statements)
    return dataclasses.replace(program, forward_mode=Pass(statements))


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_backend_prints_the_programs_forward_mode(backend):
    """Each backend's layout takes the Program's forward-mode statements: with the contraction of c's local
    term doubled, the generated forward_mode_grads doubles dL/dc and keeps every other gradient."""
    model = load("elman")
    source = BACKENDS[backend].module_source(model, planted(build(model)))
    assert "# PLANTED: c doubled" in source
    module = types.ModuleType(f"planted_{backend}")
    exec(compile(source, f"<planted {backend}>", "exec"), module.__dict__)
    numpy_module = load_module(model, from_zoo=True)
    arrays = problem(numpy_module)
    _, grads = run_forward_mode(module, backend, arrays)
    _, expected = numpy_module.loss_and_grads(*arrays[:3], **arrays[3])
    assert relative(grads["c"], 2 * expected["c"]) <= 1e-12
    assert all(relative(grads[key], expected[key]) <= 1e-12 for key in expected if key != "c")


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("example", EXAMPLES, ids=["gated", "lstm", "torch-lstm"])
def test_examples_forward_mode_equals_bptt(example, backend):
    """A user's cell (a sigmoid gate; two states; stacked weights read by blocks): forward_mode_grads of
    the backend's module gives the NumPy module's BPTT loss and gradients, every key, to 1e-12."""
    model = load(example)
    numpy_module = load_module(model, from_zoo=False)
    arrays = problem(numpy_module)
    expected_loss, expected = numpy_module.loss_and_grads(*arrays[:3], **arrays[3])
    loss, grads = run_forward_mode(load_module(model, from_zoo=False, backend=backend), backend, arrays)
    assert abs(loss - expected_loss) <= 1e-12 * abs(expected_loss)
    assert set(grads) == set(expected)  # (JAX's jit returns a dict's keys sorted)
    errors = {key: relative(grads[key], expected[key]) for key in expected}
    assert max(errors.values()) <= 1e-12, errors
