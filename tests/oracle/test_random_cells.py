"""Random cells composed from the model language (tests/support/cells.py), proven in every backend: each is
derived, generated for numpy, torch and JAX by the entry `bptt codegen --backend all` uses, and
compared with the oracle (tests/support/oracle.py, which shares no code with codegen) in full BPTT and in a
drawn window or chunk truncation (torch's compile=True path too, its step functions run uncompiled). The generator
is shown to write the shapes that broke users."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import dataclasses
import functools
import hashlib
import importlib.util
import pathlib
import re
import sys
import tempfile

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from bptt.codegen.backends import BACKENDS
from bptt.codegen.printing.columns import WIDTH
from bptt.codegen.printing.printer import PrintError
from bptt.derive.adjoint import NoRule
from bptt.derive.bptt import derive
from bptt.derive.model import ModelError
from bptt.tests.support import cells, oracle
from bptt.tests.support.cell_plans import Gate, Layer, Plan, Term, Update, build, random_values
from bptt.tests.support.cell_shapes import SHAPES
from bptt.tests.support.cells import plans, truncations
from bptt.tests.support.checkpoints import assert_equal_gradients, assert_same_loss
from bptt.tests.support.jax_eager import eagerly

BATCH = 2
DETERMINISTIC = {"deadline": None, "database": None, "derandomize": True}
# Why a model may be refused, as the README documents it: a node without a rule, named.
DOCUMENTED_REFUSALS = (r"has no adjoint rule yet", r"has no forward-mode rule yet", r"give the model a concrete")
REFUSALS = (ModelError, NoRule, PrintError)


def generate(model, folder):
    """{backend: module}: every backend's module of the model, written into folder and imported from there;
    each in 120 columns, as every generated module (tests/codegen/test_columns.py)."""
    modules = {}
    for name, backend in BACKENDS.items():
        path = pathlib.Path(folder) / backend.filename(model.name)
        source = backend.module_source(model)
        long = [line for line in source.splitlines() if len(line) > WIDTH]
        assert not long, f"{name}: {len(long)} lines over {WIDTH} columns, the first: {long[0]}"
        path.write_text(source, encoding="utf-8")
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


def compare(backend, module, model, values, truncate, expected=None):
    """oracle.compare, naming the backend and the truncation; JAX runs its operations one by one
    (jax_eager.eagerly): compiling each random cell's module would take seconds, while the eager
    operations of these small shapes compile once for all cells. In full BPTT the NumPy and torch
    modules' forward_mode_grads too (JAX's, eager, would compile each of its many slices once per cell;
    it prints the same statements, and test_oracle.py proves it on the zoo)."""
    try:
        if backend == "jax":
            with eagerly(module):
                return oracle.compare(module, model, *values, truncate, expected=expected)
        return oracle.compare(module, model, *values, truncate, forward_mode=truncate is None, expected=expected)
    except AssertionError as error:
        error.add_note(f"backend {backend}, truncate={truncate}")
        raise


@functools.cache
def generated(plan):
    """derive_and_generate in a folder of its own, once per plan (Hypothesis draws some plans again)."""
    with tempfile.TemporaryDirectory() as folder:
        return derive_and_generate(plan, folder)


def modes(backend, truncate, seed):
    """The truncations a backend is compared in: NumPy and torch in full BPTT and the drawn truncation;
    JAX, whose eager operations cost 20 times theirs, in one of the two, by the seed's parity (over
    the 200 cells about half of each: every cell still runs through every backend)."""
    if backend != "jax":
        return (None, truncate)
    return (truncate,) if seed % 2 else (None,)


def steps_as_written(module, model, values, truncate, expected):
    """torch's compile=True, its step functions run uncompiled (torch.compile takes seconds a cell): the code it
    hands to torch.compile, printed apart from the loops (torch/steps.py), agrees with the oracle too."""
    compiled = vars(module).get("_compiled")  # absent when the module has no loop
    module._compiled = lambda step: step
    try:
        oracle.compare(module, model, *values, truncate, expected=expected, options={"compile": True})
    except AssertionError as error:
        error.add_note(f"torch's compile=True, its steps uncompiled, truncate={truncate}")
        raise
    finally:
        if compiled is None:
            del module._compiled
        else:
            module._compiled = compiled


def checkpointed_as_full(module, values, truncate, found):
    """loss_and_grads in bounded memory (one slot, two) equals full BPTT's to 1e-14, in full BPTT and the
    drawn truncation (for a NumPy or torch module; JAX prints the same statements and is proven on the
    zoo, tests/backends/test_checkpoints_jax.py). found: {truncation: what loss_and_grads returned in it, as
    compared with the oracle}."""
    to_framework, to_numpy = oracle._framework(module)
    params, xs, ys, initial = values
    arrays = ({k: to_framework(v) for k, v in params.items()}, to_framework(xs), to_framework(ys))
    states = {f"{k}0": to_framework(v) for k, v in initial.items()}
    for mode in (None, truncate):
        loss, expected = found[mode]
        for budget in (1, 2):
            other, got = module.loss_and_grads(*arrays, **states, truncate=mode, checkpoints=budget)
            assert_same_loss(to_numpy(loss), to_numpy(other))
            grads = [{k: to_numpy(v) for k, v in found.items()} for found in (expected, got)]
            assert_equal_gradients(*grads, 1e-14)


def bounded_memory_backend(seed):
    """The backend a cell is also run in bounded memory in: NumPy or torch, by the seed's parity (every cell in
    one of the two, about half in each, as JAX's modes)."""
    return "numpy" if seed % 2 else "torch"


def draw_cell(data):
    """What check_random_cell is given, drawn in this order: (plan, T = 3 or 4, a truncation, a seed)."""
    plan = data.draw(plans(), label="plan")
    steps = data.draw(st.integers(3, 4), label="T")
    truncate = data.draw(truncations(steps), label="truncate")
    return plan, steps, truncate, data.draw(st.integers(0, 2**16), label="seed")


def check_random_cell(plan, steps, truncate, seed):
    """A cell, T = 3 or 4 and a truncation: every backend agrees with the oracle in full BPTT and in
    that truncation (JAX in one of them, modes), unless the cell is refused for a documented reason;
    NumPy or torch (bounded_memory_backend) also gives full BPTT's gradients in bounded memory."""
    model, modules = generated(plan)
    if modules is None:
        return
    values = random_values(model, steps, BATCH, seed)
    expected = {mode: oracle.run(model, *values, mode) for mode in (None, truncate)}  # one oracle run for all
    found = {}  # (backend, truncation): what its loss_and_grads returned
    for backend, module in modules.items():
        for mode in modes(backend, truncate, seed):
            found[backend, mode] = compare(backend, module, model, values, mode, expected[mode])
    for mode in (None, truncate):
        steps_as_written(modules["torch"], model, values, mode, expected[mode])
    backend = bounded_memory_backend(seed)
    try:
        checkpointed_as_full(
            modules[backend], values, truncate, {mode: found[backend, mode] for mode in (None, truncate)}
        )
    except AssertionError as error:
        error.add_note(f"backend {backend} in bounded memory, truncate={truncate}")
        raise


# Two tests of 120 cells, 240 distinct cells whatever the version of Hypothesis: each draws cells until it has
# 120 new plans of its half (half, a rule of the plan), the others rejected, and asserts that it proved 120 (that
# Hypothesis did not stop early); none is in both, as half() gives each plan one half. No shrinking: every cell
# generates three modules, and the plan of a failing one is printed whole (tests/support/cell_plans.py builds it). The
# two are the suite's longest proofs, handed out first as one unit: run by one worker one after the other, the second
# half finds the eager programs JAX compiled for these small shapes and the caches the first warmed (measured in runs
# of the suite: 124-125 CPU-s as two units on two workers, 111-114 as one), while the other worker runs the zoo's
# check sweep.
HALF = pytest.mark.slow(seconds=100, unit="random cells")
CELLS = settings(
    max_examples=120,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    **DETERMINISTIC,
)
PER_HALF = CELLS.max_examples


def half(plan):
    """0 or 1, a rule of the plan (the first byte of its text's SHA-256): the test that proves it."""
    return hashlib.sha256(repr(plan).encode()).digest()[0] % 2


def prove_cells(which):
    """check_random_cell on PER_HALF distinct plans of half `which` (a cell is only proven the first time its plan is
    drawn), all of them: AssertionError if Hypothesis stopped before."""
    proven = set()

    @CELLS
    @given(data=st.data())
    def prove(data):
        plan, *rest = draw_cell(data)
        assume(half(plan) == which and plan not in proven)
        check_random_cell(plan, *rest)
        proven.add(plan)  # once proven: a failing cell is replayed to be reported

    prove()
    assert len(proven) == PER_HALF, f"Hypothesis stopped after {len(proven)} cells of half {which}"


@HALF
def test_random_cells_agree_with_the_oracle_in_every_backend():
    prove_cells(0)


@HALF
def test_more_random_cells_agree_with_the_oracle_in_every_backend():
    prove_cells(1)


# --- the shapes that broke users -------------------------------------------------------------


CORPUS = 300  # derandomized plans the shapes are looked for in


@functools.cache
def corpus():
    """The CORPUS derandomized plans, in the order drawn."""
    drawn = []

    @settings(max_examples=CORPUS, **DETERMINISTIC)
    @given(plans())
    def collect(plan):
        drawn.append(plan)

    collect()
    return drawn


@functools.cache
def built(number):
    """The Model of the corpus's plan `number`, or the error building it raised; built once for every shape."""
    try:
        return build(corpus()[number])
    except Exception as error:  # reported by the shape tests; the cells test fails on it
        return error


@pytest.mark.parametrize("shape", SHAPES)
def test_the_generator_writes(shape):
    """Among the CORPUS derandomized plans, one builds into a Model with the shape (built in order until one
    has it); if none does, the message names what went wrong building the plans (a bug in the model
    language, not the generator)."""
    models = (built(number) for number in range(len(corpus())))
    if not any(SHAPES[shape](model) for model in models if not isinstance(model, Exception)):
        every = [built(number) for number in range(len(corpus()))]
        errors = sorted({f"{type(e).__name__}: {e}" for e in every if isinstance(e, Exception)})
        models = [model for model in every if not isinstance(model, Exception)]
        pytest.fail(
            f"no cell of {len(models)} built has {shape}; {len(every) - len(models)} plans failed to build: {errors}"
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

    def numpy_forward(*args):  # (params, sizes, x, ..., work[, compile]): fills the work arrays (NumPy, torch)
        original(*args)
        work = args[-1] if isinstance(args[-1], dict) else args[-2]
        work[state] *= 1 + 1e-6

    def framework_forward(*args):  # returns (outputs, cache)
        outputs, cache = original(*args)
        return outputs, {**cache, state: cache[state] * (1 + 1e-6)}

    module._forward = framework_forward if backend == "jax" else numpy_forward
    module._PASSES = dataclasses.replace(module._PASSES, forward=module._forward)  # the one the runtime runs


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


def test_draws_do_not_depend_on_the_modules_loaded(tmp_path, monkeypatch):
    """The derandomized draws are the same after a local module full of integer constants is loaded (Hypothesis
    mixes such constants into its draws unless told not to, tests/conftest.py): which cells are proven does
    not depend on which tests ran before in the same process."""

    def draws():
        drawn = []

        @settings(max_examples=200, **DETERMINISTIC)
        @given(st.integers(0, 2**16))
        def collect(number):
            drawn.append(number)

        collect()
        return drawn

    before = draws()
    path = tmp_path / "many_constants.py"
    path.write_text(f"CONSTANTS = {tuple(range(1000, 1400))}\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("many_constants", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "many_constants", module)
    assert draws() == before


def test_the_strategies_kept_per_arguments_draw_what_new_ones_draw(monkeypatch):
    """tests/support/cells.py hands out one strategy object per arguments (Hypothesis checks each new object when
    first drawn from): the derandomized plans are those drawn with a new strategy object for every draw."""

    def draws():
        drawn = []

        @settings(max_examples=60, **DETERMINISTIC)
        @given(plans())
        def collect(plan):
            drawn.append(plan)

        collect()
        return drawn

    kept = draws()
    for name in ("terms", "gates", "update", "layers", "_sampled", "_some_of", "_permutations"):
        monkeypatch.setattr(cells, name, getattr(cells, name).__wrapped__)
    assert draws() == kept


# The cell these tests found wrong in JAX under window truncation (its JAX step joined a group too early, below)
FORCED_TERMS = (
    (("recurrent", "c1", ""), ("recurrent", "p", ""), ("recurrent", "h1", ""), ("input", "", "")),
    (("recurrent", "c1", ""), ("recurrent", "p", ""), ("recurrent", "h1", ""), ("now", "c1", "")),
)
FORCED_IDENTITY = Plan(
    layers=(
        Layer(
            index=1,
            states=("c1", "h1"),
            stacked=False,
            gates=(),
            updates=(
                Update("c1", "activation", (), "identity", tuple(Term(*t) for t in FORCED_TERMS[0]), False),
                Update("h1", "activation", (), "identity", tuple(Term(*t) for t in FORCED_TERMS[1]), False),
            ),
        ),
    ),
    loss="softmax",
    mean=False,
    forcing=True,
    head_bias=False,
)


def test_a_teacher_forced_cell_under_window_truncation_agrees_in_every_backend():
    check_random_cell(FORCED_IDENTITY, 3, ("window", 2), 31871)


# The cause, without teacher forcing: c1 is read by h1 in its own step (M c1_t), so dL/dc1_t is assigned
# M^T dL/dh1_t and then added to by its flow from t+1. The JAX step joined [dL/dc1_t, dL/dh1_t] (the group
# its stacked flows and gradients read) after the assignment, before the flow, in full BPTT as in a window.
STATE_READ_IN_ITS_STEP = dataclasses.replace(
    FORCED_IDENTITY,
    forcing=False,
    layers=(
        dataclasses.replace(
            FORCED_IDENTITY.layers[0],
            updates=tuple(
                dataclasses.replace(update, terms=tuple(term for term in update.terms if term.source != "p"))
                for update in FORCED_IDENTITY.layers[0].updates
            ),
        ),
    ),
)


def test_a_state_read_in_its_own_step_agrees_in_every_backend_and_in_jax_in_both_modes():
    """Every backend as any cell (JAX in full BPTT by the even seed; NumPy and torch keep a group's members as
    views of it, so theirs cannot lag), and JAX in the window too."""
    check_random_cell(STATE_READ_IN_ITS_STEP, 3, ("window", 2), 31870)
    model, modules = generated(STATE_READ_IN_ITS_STEP)
    compare("jax", modules["jax"], model, random_values(model, 3, BATCH, 31870), ("window", 2))


# h1 is read by nothing (layer 2 reads x), so dL/dh1_t is 0, and dL/dc1_t's hoisted part reads it. The JAX
# module left out the zero's assignment (as it does for a hoisted part the loop writes), and chunk truncation's
# gradients stopped on `NameError: name 'd_h1' is not defined`.
UNREAD_STATE = Plan(
    layers=(
        Layer(
            index=1,
            states=("c1", "h1"),
            stacked=True,
            gates=(
                Gate("z1", "silu", (Term("recurrent", "c1", ""), Term("input", "", "")), named=True),
                Gate("r1", "tanh", (Term("recurrent", "c1", ""),), named=True),
            ),
            updates=(
                Update("c1", "cell", ("z1", "r1"), "identity", (), swapped=False),
                Update("h1", "output", ("r1",), "gelu", (), swapped=False),
            ),
        ),
        Layer(
            index=2,
            states=("h2",),
            stacked=False,
            gates=(Gate("z2", "step", (Term("recurrent", "h2", ""), Term("input", "", "")), named=False),),
            updates=(
                Update(
                    "h2",
                    "activation",
                    (),
                    "gelu",
                    (Term("product", "h2", "z2"), Term("recurrent", "h2", "")),
                    swapped=False,
                ),
            ),
        ),
    ),
    loss="softmax",
    mean=False,
    forcing=False,
    head_bias=False,
)


def test_an_adjoint_nothing_reaches_is_zeros_in_jax_under_chunk_truncation():
    check_random_cell(UNREAD_STATE, 4, ("chunk", 4), 10893)  # an odd seed: JAX in the truncation


# A wide intermediate a1 (2h rows) read once, by the unnamed gate f1 = elu(a1_t[:h, :]): forward computed a1 in its
# reader's place with the slice printed after the whole sum (x @ W_a1.T + h1 @ U_a1.T[:n_h]), indexing U_a1^T's rows,
# and stopped writing a (T, B, 2h) array into (T, B, h). Now the rows are taken on the leaves, W_a1[:h] x_t + ...
SLICED_ONCE = Plan(
    layers=(
        Layer(
            index=1,
            states=("h1",),
            stacked=False,
            gates=(
                Gate("z1", "sigmoid", (Term("input"), Term("bias"), Term("recurrent", source="h1")), named=False),
                Gate("f1", "elu", (Term("slice"),), named=False),
            ),
            updates=(Update("h1", "activation", (), "gelu", (Term("input"), Term("recurrent", source="h1"))),),
        ),
    ),
    loss="squared",
    mean=True,
    forcing=False,
    head_bias=False,
)


def test_a_slice_of_a_value_computed_in_its_readers_place_agrees_in_every_backend():
    check_random_cell(SLICED_ONCE, 3, ("window", 1), 0)
