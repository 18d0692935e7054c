"""One seam: the forward pass is program.build's IR statements
(program.forward: statements, arrays, stacks, after the fusion passes), and every backend prints that
Pass; none derives, fuses or rebuilds one of its own.

(a) The torch and JAX modules equal the NumPy module to 1e-12: outputs, cache (the steps each holds), loss and every
gradient, full BPTT and window and chunk truncation, for every zoo model and every cell of examples/*.py,
torch.nn.LSTM(num_layers=2) as a user's cell among them (layer 2 reads h1_t at the same step: the
product a fusion of the gates alone would drop), whose NumPy module is also proved against
torch.nn.LSTM itself, by autograd. The examples are rendered in memory, slowly (their forward mode is
most of it), so they are marked slow.
(b) Structurally: each backend prints the Program it is given (a changed forward Pass changes every
backend's outputs alike), only the IR passes build statements or call the fusion passes, and the
Pass is the same bytes whatever the hash seed.
"""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import ast
import contextlib
import functools
import importlib
import io
import os
import pathlib
import subprocess
import sys
from dataclasses import replace

import jax
import numpy as np
import torch

from bptt.codegen.backends import BACKENDS
from bptt.codegen.ir import Accumulate, Loop
from bptt.codegen.program import build
from bptt.derive.models import load
from bptt.tests.support.jax_eager import on_device
from bptt.tests.support.modules import cache_steps
from bptt.tests.support.zoo import supporting

jax.config.update("jax_enable_x64", True)

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = (
    "gated_rnn.py:gated_rnn",
    "lstm.py:lstm",
    "lstm_2layer.py:lstm",
    "lstm_2layer.py:separate",
    "torch_lstm.py:lstm",
)
MODES = (None, ("window", 2), ("chunk", 2))
T, B = 5, 3
XDIST_GROUP = (
    "zoo modules at T=5, B=3"  # with test_backend_jax.py and the oracle tests: the same shapes, compiled once for all
)
BUILDERS = ("ir", "program", "passes.")  # codegen's modules that build statements: the IR and its passes
FORWARD_MODE = {"jax.forward_mode", "torch.rtrl"}  # forward mode's printers: the tangent loops' own statements
STATEMENTS = {"Assign", "Accumulate", "Flow", "Loop", "Guard", "Stack", "Pass", "Program"}
PASS_BUILDERS = {"derived", "forward_statements", "backward_statements", "shared", "rewritten", "build"}


def rendered(model, program=None):
    """{backend: the module of model printed from program (build(model)'s if None), run in memory}."""
    out = {}
    for backend in ("numpy", "torch", "jax"):
        module = type(sys)(f"seam_{model.name}_{backend}")
        exec(compile(BACKENDS[backend].module_source(model, program), f"<{backend}>", "exec"), module.__dict__)
        out[backend] = module
    return out


@functools.cache
def zoo_modules(name):
    stem = name.replace("-", "_")
    return {b: importlib.import_module(f"bptt.generated.{stem}{BACKENDS[b].suffix}") for b in BACKENDS}


def problem(numpy_module, seed=3):
    """NumPy arrays: params, xs, ys and non-zero initial states, distinct sizes (2, 3, 4)."""
    rng = np.random.default_rng(seed)
    sizes = {size: 2 + k for k, size in enumerate(numpy_module.SIZES)}
    params = numpy_module.init_params(rng, **sizes)
    xs, ys = numpy_module.random_inputs(rng, T, B, **sizes)
    initial = {key: 0.5 * rng.standard_normal((B, sizes[size])) for key, size in numpy_module.STATES.items()}
    return params, xs, ys, initial


CONVERT = {"numpy": lambda a: a, "torch": torch.from_numpy, "jax": on_device}


def call(backend, function, *arrays, **options):
    """function(params, xs, ...) of a backend's module on the NumPy arrays, converted for its framework."""
    convert = CONVERT[backend]
    args = [{k: convert(v) for k, v in a.items()} if isinstance(a, dict) else convert(a) for a in arrays[:-1]]
    initial = {k: convert(v) for k, v in arrays[-1].items()}
    return function(*args, **initial, **options)


def as_numpy(value):
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def assert_equal(got, expected, what, tolerance=1e-12):
    """Every array of got within tolerance of expected's, relative to the largest entry of each."""
    assert set(got) == set(expected), f"{what}: keys {sorted(got)} != {sorted(expected)}"
    for key, value in expected.items():
        value = np.asarray(value, np.float64)
        error = np.abs(as_numpy(got[key]) - value).max() / max(np.abs(value).max(), 1e-300)
        assert error <= tolerance, f"{what}: {key} differs by {error:.1e} (relative)"


def forward(backend, module, arrays):
    params, xs, ys, initial = arrays
    teacher = (ys,) if module.TEACHER_FORCED else ()
    return call(backend, module.forward, params, xs, *teacher, initial)


def assert_backends_agree(modules, arrays, what):
    """Outputs, cache, loss and every gradient of torch and JAX equal NumPy's, in each of MODES."""
    outputs, cache = forward("numpy", modules["numpy"], arrays)
    for backend in ("torch", "jax"):
        got, got_cache = forward(backend, modules[backend], arrays)
        expected = cache_steps(cache, modules[backend], modules["numpy"])
        assert_equal({"outputs": got, **got_cache}, {"outputs": outputs, **expected}, f"{what} {backend} forward")
    for mode in MODES:
        loss, grads = call("numpy", modules["numpy"].loss_and_grads, *arrays, truncate=mode)
        for backend in ("torch", "jax"):
            got_loss, got = call(backend, modules[backend].loss_and_grads, *arrays, truncate=mode)
            assert abs(float(got_loss) - loss) <= 1e-12 * abs(loss), f"{what} {backend} {mode} loss"
            assert_equal(got, grads, f"{what} {backend} {mode}")


@pytest.mark.parametrize("name", supporting("one_program"))
def test_every_zoo_model_agrees(name):
    modules = zoo_modules(name)
    assert_backends_agree(modules, problem(modules["numpy"]), name)


def torch_two_layer_lstm(params, xs, ys, initial):
    """The loss and gradients of torch.nn.LSTM(num_layers=2) with the head s_t = V h2_t and the squared error,
    by torch autograd: an oracle for examples/lstm_2layer.py:lstm that shares nothing with codegen."""
    d, h = params["W_ih1"].shape[1], params["W_hh1"].shape[1]
    lstm = torch.nn.LSTM(d, h, num_layers=2, dtype=torch.float64)
    names = {"W_ih": "weight_ih", "W_hh": "weight_hh", "b_ih": "bias_ih", "b_hh": "bias_hh"}
    with torch.no_grad():
        for ours, theirs in names.items():
            for layer in (1, 2):
                getattr(lstm, f"{theirs}_l{layer - 1}").copy_(torch.from_numpy(params[f"{ours}{layer}"]))
    V = torch.tensor(params["V"], requires_grad=True)
    states = {
        key: torch.tensor(np.stack([initial[f"{key}10"], initial[f"{key}20"]]), requires_grad=True) for key in "hc"
    }
    hidden, _ = lstm(torch.from_numpy(xs), (states["h"], states["c"]))
    loss = 0.5 * ((hidden @ V.T - torch.from_numpy(ys)) ** 2).sum() / xs.shape[1]
    loss.backward()
    grads = {
        f"{ours}{layer}": getattr(lstm, f"{theirs}_l{layer - 1}").grad
        for ours, theirs in names.items()
        for layer in (1, 2)
    }
    grads |= {f"{key}{layer}0": states[key].grad[layer - 1] for key in "hc" for layer in (1, 2)}
    return float(loss.detach()), grads | {"V": V.grad}


def torch_two_layer_lstm_by_gate(params, xs, ys, initial):
    """The same for examples/lstm_2layer.py:separate: its per-gate weights stacked in torch's order i, f, g, o,
    each gradient its rows of torch's."""
    kinds = {"W_ih": "W_i", "W_hh": "W_h", "b_ih": "b_i", "b_hh": "b_h"}
    per_gate, parts = {}, {}  # a gate's parameter -> (torch's stacked parameter, the gate's block)
    for whole, kind in kinds.items():
        for layer in (1, 2):
            for k, gate in enumerate("ifgo"):
                per_gate[f"{kind}{gate}{layer}"] = (f"{whole}{layer}", k)
                parts.setdefault(f"{whole}{layer}", []).append(params[f"{kind}{gate}{layer}"])
    stacked = {whole: np.concatenate(blocks) for whole, blocks in parts.items()}
    loss, grads = torch_two_layer_lstm({**stacked, "V": params["V"]}, xs, ys, initial)
    h = params["W_hi1"].shape[0]
    split = {gate: grads[whole][k * h : (k + 1) * h] for gate, (whole, k) in per_gate.items()}
    return loss, split | {key: grads[key] for key in grads if key not in stacked}


ORACLES = {"lstm_2layer.py:lstm": torch_two_layer_lstm, "lstm_2layer.py:separate": torch_two_layer_lstm_by_gate}


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_agrees(example):
    """Every backend agrees on each example cell; where the cell is a framework's own module (ORACLES), the
    NumPy module's loss and gradients are that module's autograd's."""
    modules = rendered(load(f"{ROOT / 'examples'}/{example}"))
    arrays = problem(modules["numpy"])
    assert_backends_agree(modules, arrays, example)
    if example in ORACLES:
        loss, grads = call("numpy", modules["numpy"].loss_and_grads, *arrays)
        expected_loss, expected = ORACLES[example](*arrays)
        assert abs(loss - expected_loss) <= 1e-12 * abs(expected_loss)
        assert_equal(grads, expected, f"{example} against its framework's autograd")


def doubled(forward_pass, model):
    """The forward Pass with each state doubled after every step writes it (Accumulate(h_t, h_t)) and the
    outputs doubled at the end: a pass no backend prints unless it prints the Pass it is given."""
    states = {seq.name for seq in model.states}
    statements = []
    for statement in forward_pass.statements:
        if isinstance(statement, Loop):
            body = []
            for inner in statement.body:
                body.append(inner)
                if inner.target.name in states:
                    body.append(Accumulate(inner.target, inner.target, "doubled"))
            statement = Loop(tuple(body), statement.backward)
        statements.append(statement)
    output = model.outputs[0][0]()
    statements.append(Accumulate(output, output, "doubled"))
    return replace(forward_pass, statements=tuple(statements))


@pytest.mark.parametrize("name", ["elman-jordan", "lstm"])
def test_every_backend_prints_the_programs_forward_pass(name):
    """A forward Pass changed in the loop and after it: torch and JAX compute what NumPy computes from it
    (outputs and cache to 1e-12), which is not what they compute from the Program as built."""
    model = load(name)
    program = build(model)
    changed = replace(program, forward=doubled(program.forward, model))
    modules = rendered(model, changed)
    arrays = problem(modules["numpy"])
    outputs, cache = forward("numpy", modules["numpy"], arrays)
    usual, _ = forward("numpy", zoo_modules(name)["numpy"], arrays)
    assert np.abs(outputs - 2 * usual).max() > 1e-3 * np.abs(usual).max()  # the loop's doubling shows
    for backend in ("torch", "jax"):
        got, got_cache = forward(backend, modules[backend], arrays)
        expected = cache_steps(cache, modules[backend], modules["numpy"])
        assert_equal({"outputs": got, **got_cache}, {"outputs": outputs, **expected}, f"{name} {backend}")


def codegen_modules():
    """(dotted name under codegen, syntax tree) of every module of codegen/: "passes.fuse", "torch.printer"..."""
    for path in sorted((ROOT / "codegen").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT / "codegen").with_suffix("").parts)
        yield name, ast.parse(path.read_text(encoding="utf-8"))


def imports(tree):
    """(module, names) of every `from bptt.codegen... import names` in tree, the module under codegen."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bptt.codegen"):
            module = node.module.removeprefix("bptt.codegen").removeprefix(".")
            yield module, {alias.name for alias in node.names}


def test_only_the_ir_passes_build_statements():
    """No printer, layout or renderer constructs an ir statement, imports a pass, or builds a pass from the
    model (program.derived...): a backend that rebuilt its forward pass would."""
    names = dict(codegen_modules())
    assert {"ir", "program", "passes.fuse", "printing.printer", "torch.printer", "jax.scan"} <= set(names)
    found = []
    for name, tree in names.items():
        if name.startswith(BUILDERS) or name in FORWARD_MODE:
            continue
        for module, imported in imports(tree):
            if module == "passes" or module.startswith("passes."):
                found.append(f"{name} imports {module}: {sorted(imported)}")
            if module == "program" and imported & PASS_BUILDERS - {"build"}:
                found.append(f"{name} imports {imported & PASS_BUILDERS} from program")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in STATEMENTS:
                found.append(f"{name} constructs {node.func.id}")
    assert not found, found


HASHED = """
import hashlib
from bptt.codegen.program import build
from bptt.derive.models import load
from bptt.tests.support.zoo import supporting
for name in [*supporting("one_program"), "{example}:lstm"]:
    print(name, hashlib.sha256(repr(build(load(name)).forward).encode()).hexdigest())
"""


def test_the_forward_pass_does_not_depend_on_the_hash_seed():
    """The IR is built from sets and dicts of SymPy nodes: sorted, it is the same under any PYTHONHASHSEED
    (so every backend's module regenerates byte-identical). This process's forward passes against those of a
    process whose hash seed differs from this one's (this one's is random, or the PYTHONHASHSEED it was given)."""
    code = HASHED.format(example=ROOT / "examples" / "lstm_2layer.py")
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed}
    )
    assert other.returncode == 0, other.stderr
    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(code, {})
    assert here.getvalue() == other.stdout and len(other.stdout.splitlines()) == len(supporting("one_program")) + 1
