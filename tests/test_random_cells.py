"""Random cells composed from the model language (tests/cells.py), proven in every backend: each is
derived, generated for numpy, torch and JAX by the entry `bptt codegen --backend all` uses, and
compared with the oracle (tests/oracle.py, which shares no code with codegen) in full BPTT and in a
drawn window or chunk truncation. The generator is shown to write the shapes that broke users."""

import functools
import importlib.util
import pathlib
import re
import sys
import tempfile

import jax
import oracle
import pytest
import sympy as sp
from cell_plans import ACTIVATIONS, Gate, Layer, Plan, Term, Update, build, h, random_values
from cells import plans, truncations
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sympy.matrices.expressions.special import OneMatrix

from bptt.codegen.backends import BACKENDS
from bptt.codegen.numpy_printer import PrintError
from bptt.derive.adjoint import NoRule
from bptt.derive.bptt import derive
from bptt.derive.elementwise import Apply
from bptt.derive.model import ModelError
from bptt.derive.nodes import SeqAt, SoftmaxCrossEntropy, SquaredError, t

BATCH = 2
DETERMINISTIC = {"deadline": None, "database": None, "derandomize": True}
# Why a model may be refused, as the README documents it: a node without a rule, named.
DOCUMENTED_REFUSALS = (r"^no adjoint rule for \w+ node", r"^no tangent rule for \w+ node", r"give the model a concrete")
REFUSALS = (ModelError, NoRule, PrintError)


def generate(model, folder):
    """{backend: module}: every backend's module of the model, written into folder and imported from there."""
    modules = {}
    for name, backend in BACKENDS.items():
        path = pathlib.Path(folder) / backend.filename(model.name)
        path.write_text(backend.module_source(model), encoding="utf-8")
        modules[name] = import_file(path, f"random_cell_{id(folder)}_{name}")
    return modules


def import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # while it runs, as for any import (dataclasses look their module up)
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def derive_and_generate(plan, folder):
    """(model, modules) of a plan, or (None, None) when the model language, derive or codegen
    refuses it for a documented reason."""
    try:
        model = build(plan)
        derive(model, named="textbook")  # the derivation `bptt latex` prints; codegen derives its own
        return model, generate(model, folder)
    except REFUSALS as error:
        message = str(error)
        documented = "\n" not in message and any(re.search(pattern, message) for pattern in DOCUMENTED_REFUSALS)
        assert documented, f"refused for an undocumented reason: {type(error).__name__}: {message}"
        return None, None


def compare(backend, module, model, values, truncate):
    """oracle.compare, naming the backend and the truncation; JAX runs its operations one by one
    (jax.disable_jit): compiling each random cell's module would take seconds, while the eager
    operations of these small shapes compile once for all cells."""
    try:
        if backend == "jax":
            with jax.disable_jit():
                oracle.compare(module, model, *values, truncate)
        else:
            oracle.compare(module, model, *values, truncate)
    except AssertionError as error:
        error.add_note(f"backend {backend}, truncate={truncate}")
        raise


def check_random_cell(data):
    """A drawn cell, T = 3 or 4 and a drawn truncation: every backend agrees with the oracle in
    full BPTT and in that truncation, unless the cell is refused for a documented reason."""
    plan = data.draw(plans(), label="plan")
    steps = data.draw(st.integers(3, 4), label="T")
    truncate = data.draw(truncations(steps), label="truncate")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    with tempfile.TemporaryDirectory() as folder:
        model, modules = derive_and_generate(plan, folder)
    if modules is None:
        return
    values = random_values(model, steps, BATCH, seed)
    for backend, module in modules.items():
        for mode in (None, truncate):
            compare(backend, module, model, values, mode)


# 240 examples, 208 distinct cells (Hypothesis draws some again), as two tests of 120 that run in the
# two background workers at once (tests with other names draw other cells). No shrinking: every example generates three modules, and the plan of a
# failing one is printed whole (tests/cell_plans.py builds it).
CELLS = settings(
    max_examples=120,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
    **DETERMINISTIC,
)


@pytest.mark.background  # runs in a worker process while the suite runs (background.py)
@CELLS
@given(data=st.data())
def test_random_cells_agree_with_the_oracle_in_every_backend(data):
    check_random_cell(data)


@pytest.mark.background
@CELLS
@given(data=st.data())
def test_more_random_cells_agree_with_the_oracle_in_every_backend(data):
    check_random_cell(data)


def test_the_two_tests_draw_200_distinct_cells(monkeypatch):
    drawn = []
    monkeypatch.setattr(sys.modules[__name__], "check_random_cell", lambda data: drawn.append(data.draw(plans())))
    test_random_cells_agree_with_the_oracle_in_every_backend()
    test_more_random_cells_agree_with_the_oracle_in_every_backend()
    assert len(drawn) == 240 and len(set(drawn)) >= 200


# --- the shapes that broke users -------------------------------------------------------------


@functools.cache
def corpus():
    """300 derandomized plans, each with its Model or the error building it raised."""
    drawn = []

    @settings(max_examples=300, **DETERMINISTIC)
    @given(plans())
    def collect(plan):
        drawn.append(plan)

    collect()
    return [(plan, _built(plan)) for plan in drawn]


def _built(plan):
    try:
        return build(plan)
    except Exception as error:  # reported by the shape tests; the cells test fails on it
        return error


def nodes(model):
    return [(seq, node) for seq, rhs in model.assignments for node in sp.preorder_traversal(rhs)]


def _second_layer_reads_the_first_at_t(model):
    """A step of layer 2 reads h1_t through a matrix that no step of layer 1 reads."""
    layer_one = {p for seq, node in nodes(model) if seq.name.removesuffix("_bar")[-1] == "1" for p in _params(node)}
    return any(
        seq.name.removesuffix("_bar")[-1] == "2"
        and isinstance(node, sp.MatMul)
        and node.args[-1] == SeqAt("h1", t, h, "state")
        and not set(_params(node.args[-2])) & layer_one
        for seq, node in nodes(model)
    )


def _params(node):
    return [a for a in sp.preorder_traversal(node) if isinstance(a, sp.MatrixSymbol)]


def _unnamed_gate_feeds_a_gate(model):
    """An intermediate g_t = f(sum), not f(g_bar_t), read by another intermediate."""
    unnamed = {seq.name for seq, rhs in model.steps if seq.role == "intermediate" and _unnamed(rhs)}
    return any(
        seq.role == "intermediate" and isinstance(node, SeqAt) and node.name in unnamed for seq, node in nodes(model)
    )


def _unnamed(rhs):
    return isinstance(rhs, Apply) and isinstance(rhs.arg, sp.MatAdd)


def _matrix_times_elementwise_product(model):
    return any(
        isinstance(node, sp.MatMul) and isinstance(node.args[-1], sp.HadamardProduct) for _, node in nodes(model)
    )


def _plus_one(model):
    """A sum of a weight times a vector and the ones vector: W x_t + ... + 1."""
    return any(_sums_ones(node) and any(_weighted(a) for a in node.args) for _, node in nodes(model))


def _one_minus_a_gate(model):
    """1 - z_t: the ones vector minus a sequence value."""
    return any(
        _sums_ones(node)
        and any(isinstance(a, sp.MatMul) and a.args[0] == -1 and isinstance(a.args[1], SeqAt) for a in node.args)
        for _, node in nodes(model)
    )


def _sums_ones(node):
    return isinstance(node, sp.MatAdd) and any(isinstance(a, OneMatrix) for a in node.args)


def _weighted(term):
    return isinstance(term, sp.MatMul) and isinstance(term.args[0], (sp.MatrixSymbol, sp.MatrixSlice))


def _stacked_blocks(model):
    """Two or more blocks of rows of one parameter of k*h rows, W_ih1[k*h:(k+1)*h, :], k blocks."""
    blocks = {node for _, node in nodes(model) if isinstance(node, sp.MatrixSlice)}
    parents = [block.parent for block in blocks]
    return any(parents.count(p) >= 2 and p.shape[0] == parents.count(p) * h for p in parents)


def _functions(model):
    return {node.function for _, node in nodes(model) if isinstance(node, Apply)}


SHAPES = {
    "layer 2 reads layer 1's state at t through its own input weights": _second_layer_reads_the_first_at_t,
    "a gate without a named pre-activation feeds another gate": _unnamed_gate_feeds_a_gate,
    "a matrix times an elementwise product, U (r_t * h_{t-1})": _matrix_times_elementwise_product,
    "+ 1 in a sum": _plus_one,
    "1 - z_t": _one_minus_a_gate,
    "stacked weights read by blocks": _stacked_blocks,
    "a named pre-activation feeds a gate": lambda m: any(s.name.endswith("_bar") for s in m.intermediates),
    "two states in a layer (h, c)": lambda m: {"h1", "c1"} <= {s.name for s in m.states},
    "three states": lambda m: len(m.states) == 3,
    "three layers": lambda m: "h3" in {s.name for s in m.states},
    "teacher forcing": lambda m: bool(m.teacher_forcing),
    "a summed squared error": lambda m: isinstance(m.loss, SquaredError) and not m.mean,
    "a mean squared error": lambda m: isinstance(m.loss, SquaredError) and m.mean,
    "a summed softmax cross-entropy": lambda m: isinstance(m.loss, SoftmaxCrossEntropy) and not m.mean,
    "a mean softmax cross-entropy": lambda m: isinstance(m.loss, SoftmaxCrossEntropy) and m.mean,
    **{f"the elementwise function {name}": (lambda m, name=name: name in _functions(m)) for name in ACTIVATIONS},
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_generator_writes(shape):
    """Among 300 derandomized plans, one builds into a Model with the shape; if none does, the
    message names what went wrong building the plans (a bug in the model language, not the generator)."""
    built = [model for _, model in corpus() if not isinstance(model, Exception)]
    if not any(SHAPES[shape](model) for model in built):
        errors = sorted({f"{type(e).__name__}: {e}" for _, e in corpus() if isinstance(e, Exception)})
        pytest.fail(
            f"no cell of {len(built)} built has {shape}; {len(corpus()) - len(built)} plans failed to build: {errors}"
        )


# --- a planted error is caught ---------------------------------------------------------------

# A GRU-like cell that every backend handles today: h_t = z_t * n_t + (1 - z_t) * h_{t-1}.
GATED = Plan(
    layers=(
        Layer(
            index=1,
            states=("h1",),
            stacked=True,
            gates=(
                Gate("z1", "sigmoid", (Term("input"), Term("recurrent", source="h1"), Term("bias")), named=True),
                Gate("r1", "tanh", (Term("input"), Term("recurrent", source="h1")), named=True),
            ),
            updates=(Update("h1", "interpolate", ("z1", "r1")),),
        ),
    ),
    loss="squared",
    mean=False,
    forcing=False,
    head_bias=True,
)


def plant(module, backend, state):
    """Wrap the module's _forward so that the cached state array it hands backward is 1 + 1e-6 times too big."""
    original = module._forward

    def numpy_forward(*args):  # (params, sizes, x, ..., work): fills the work arrays
        original(*args)
        args[-1][state] *= 1 + 1e-6

    def framework_forward(*args):  # returns (outputs, cache)
        outputs, cache = original(*args)
        return outputs, {**cache, state: cache[state] * (1 + 1e-6)}

    module._forward = numpy_forward if backend == "numpy" else framework_forward


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_planted_error_in_a_forward_pass_is_caught(backend):
    model = build(GATED)
    values = random_values(model, 4, BATCH, seed=3)
    with tempfile.TemporaryDirectory() as folder:
        module = generate(model, folder)[backend]
    compare(backend, module, model, values, None)  # agrees as generated
    plant(module, backend, "h1")
    with pytest.raises(AssertionError, match=r"^gradient \w+ differs from the oracle"):  # backward reads the cached h_t
        compare(backend, module, model, values, None)
