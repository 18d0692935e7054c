"""The torch backend (issue 10): every zoo model's generated/<model>_torch.py against the NumPy module, in
float64 to 1e-12: the forward pass and its cache, the gradients in full BPTT and every truncation mode, any
output gradient; float32 against float64; forward mode; the autograd.Function and the nn.Module (gradcheck,
an optimiser); regeneration; bad input. The forward pass is printed in place under torch.no_grad() (as the
NumPy module's), so autograd of it is no reference. torch is imported at the top: without it these tests
fail, they do not skip."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import ast
import importlib
import pathlib
import types

import numpy as np
import torch

from bptt.codegen.backends import BACKENDS
from bptt.codegen.torch import render as torch_render
from bptt.derive.models import load
from bptt.tests.support.modules import runtime_of
from bptt.tests.support.zoo import supporting

NAMES = supporting("truncate", "forward_mode_grads", "checkpoints")
GENERATED = pathlib.Path(__file__).parents[2] / "generated"
SIZES = {"d": 2, "h": 3, "q": 4}  # distinct: a transposition cannot hide
T, B = 5, 3
TRUNCATIONS = (None, ("window", 2), ("chunk", 2), ("random", 0.5))


def modules(name):
    stem = name.replace("-", "_")
    return importlib.import_module(f"bptt.generated.{stem}"), importlib.import_module(f"bptt.generated.{stem}_torch")


def relative_error(got, expected):
    """max |got - expected| / max |expected| (the scale of the whole gradient, so tiny entries do not dominate)."""
    got, expected = np.asarray(got), np.asarray(expected)
    return float(np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-300))


def assert_grads_equal(got, expected, tolerance, what):
    assert set(got) == set(expected), what
    for key in expected:
        error = relative_error(as_numpy(got[key]), as_numpy(expected[key]))
        assert error <= tolerance, f"{what}: {key} differs by {error:.2e} (relative)"


def as_numpy(value):
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def tensors(arrays):
    return {key: torch.from_numpy(value) for key, value in arrays.items()}


class FixedDraws(np.random.Generator):
    """A NumPy generator whose random(n) returns given uniforms: the NumPy module's randomized truncation
    then keeps the steps that the torch module keeps from the same draws."""

    def __init__(self, draws):
        super().__init__(np.random.PCG64(0))
        self.draws = draws

    def random(self, size=None):
        return self.draws[:size].copy()


def zoo_problem(name):
    """(name, NumPy module, torch module, NumPy arrays: params, xs, ys, initial states)."""
    numpy_module, torch_module = modules(name)
    rng = np.random.default_rng(len(name))
    params = numpy_module.init_params(rng, **SIZES)
    xs, ys = numpy_module.random_inputs(rng, T, B, **SIZES)
    initial = {key: 0.5 * rng.standard_normal((B, SIZES[size])) for key, size in numpy_module.STATES.items()}
    return name, numpy_module, torch_module, (params, xs, ys, initial)


@pytest.fixture(scope="module", params=NAMES)
def problem(request):
    return zoo_problem(request.param)


def run_torch(torch_module, arrays, truncate=None, seed=7):
    params, xs, ys, initial = arrays
    rng = torch.Generator().manual_seed(seed)
    return torch_module.loss_and_grads(
        tensors(params), torch.from_numpy(xs), torch.from_numpy(ys), **tensors(initial), truncate=truncate, rng=rng
    )


def run_numpy(numpy_module, arrays, truncate=None, seed=7):
    """The NumPy module's loss and gradients; for random truncation from the uniforms torch draws with seed."""
    params, xs, ys, initial = arrays
    draws = torch.rand(T, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).numpy()
    return numpy_module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=FixedDraws(draws))


@pytest.mark.parametrize("truncate", TRUNCATIONS, ids=lambda mode: "full" if mode is None else mode[0])
def test_matches_numpy_module(problem, truncate):
    name, numpy_module, torch_module, arrays = problem
    loss, grads = run_torch(torch_module, arrays, truncate)
    expected_loss, expected = run_numpy(numpy_module, arrays, truncate)
    assert abs(float(loss) - expected_loss) <= 1e-12 * abs(expected_loss)
    assert_grads_equal(grads, expected, 1e-12, f"{name} {truncate}")


@pytest.mark.parametrize("name", ["elman", "lstm"])
def test_random_truncation_draws_from_the_generator(name):
    """The same seed, the same keep pattern and gradient; seeds 1 and 2 draw different patterns, and
    different gradients."""
    numpy_module, torch_module = modules(name)
    rng = np.random.default_rng(0)
    params = numpy_module.init_params(rng, **SIZES)
    xs, ys = numpy_module.random_inputs(rng, T, B, **SIZES)
    arrays = (params, xs, ys, {})
    patterns = [torch.rand(T, generator=torch.Generator().manual_seed(s), dtype=torch.float64) < 0.5 for s in (1, 2)]
    assert not torch.equal(patterns[0], patterns[1])
    first = run_torch(torch_module, arrays, ("random", 0.5), seed=1)[1]
    assert_grads_equal(run_torch(torch_module, arrays, ("random", 0.5), seed=1)[1], first, 0.0, name)
    other = run_torch(torch_module, arrays, ("random", 0.5), seed=2)[1]
    assert max(relative_error(as_numpy(other[k]), as_numpy(first[k])) for k in first) > 1e-6


def forward_both(numpy_module, torch_module, arrays):
    """(NumPy outputs and cache, torch outputs and cache) of the same problem."""
    params, xs, ys, initial = arrays
    teacher = (ys,) if numpy_module.TEACHER_FORCED else ()
    expected = numpy_module.forward(params, xs, *teacher, **initial)
    got = torch_module.forward(
        tensors(params), torch.from_numpy(xs), *map(torch.from_numpy, teacher), **tensors(initial)
    )
    return expected, got


def test_forward_equals_the_numpy_modules(problem):
    """The outputs and every cached tensor (states, gates: views of one stacked tensor) equal the NumPy module's."""
    name, numpy_module, torch_module, arrays = problem
    (outputs, cache), (got, got_cache) = forward_both(numpy_module, torch_module, arrays)
    assert not got.requires_grad and got.dtype == torch.float64
    assert relative_error(as_numpy(got), outputs) <= 1e-12, name
    assert list(got_cache) == list(cache), name
    assert_grads_equal(got_cache, cache, 1e-12, f"{name} cache")


def test_forward_mode_matches_backward(problem):
    name, _, torch_module, arrays = problem
    params, xs, ys, initial = arrays
    loss, grads = torch_module.forward_mode_grads(
        tensors(params), torch.from_numpy(xs), torch.from_numpy(ys), **tensors(initial)
    )
    expected_loss, expected = run_torch(torch_module, arrays)
    assert float(loss) == float(expected_loss)
    assert_grads_equal(grads, expected, 1e-12, name)


def test_float32_agrees_with_float64(problem):
    name, _, torch_module, arrays = problem
    params, xs, ys, initial = arrays
    single = [{k: v.astype(np.float32) for k, v in params.items()}, xs, ys]
    single = [single[0]] + [a.astype(np.float32) if a.dtype.kind == "f" else a for a in single[1:]]
    single.append({k: v.astype(np.float32) for k, v in initial.items()})
    loss, grads = run_torch(torch_module, single)
    expected_loss, expected = run_torch(torch_module, arrays)
    assert loss.dtype == torch.float32 and all(g.dtype == torch.float32 for g in grads.values())
    assert abs(float(loss) - float(expected_loss)) <= 1e-5 * abs(float(expected_loss))
    assert_grads_equal(grads, expected, 1e-4, name)


def test_forward_and_backward_keep_the_dtype_and_take_any_output_gradient(problem):
    """forward/backward as a pair: backward of a random d_outputs (no loss's) equals the NumPy module's."""
    name, numpy_module, torch_module, arrays = problem
    params = arrays[0]
    (_, cache), (outputs, torch_cache) = forward_both(numpy_module, torch_module, arrays)
    d_outputs = torch.randn(outputs.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    grads = torch_module.backward(tensors(params), torch_cache, d_outputs, truncate=("window", 3))
    expected = numpy_module.backward(params, cache, d_outputs.numpy(), truncate=("window", 3))
    assert all(grad.dtype == torch.float64 for grad in grads.values())
    assert_grads_equal(grads, expected, 1e-12, name)


def test_regeneration_is_byte_identical():
    """What `bptt codegen --backend torch` writes (its entry: the rendered module laid out in 120 columns)."""
    for name in NAMES:
        path = GENERATED / f"{name.replace('-', '_')}_torch.py"
        assert BACKENDS["torch"].module_source(load(name)) == path.read_text(encoding="utf-8"), name


def bad_inputs():
    """(what is wrong, a function of (module, params, xs, ys) that passes it): the same check in both backends."""
    return {
        "xs shape": lambda m, p, xs, ys: m.loss_and_grads(p, xs[..., :1], ys),
        "params key": lambda m, p, xs, ys: m.loss_and_grads({k: v for k, v in p.items() if k != "W"}, xs, ys),
        "params shape": lambda m, p, xs, ys: m.loss_and_grads({**p, "W": p["W"][:1]}, xs, ys),
        "label range": lambda m, p, xs, ys: m.loss_and_grads(p, xs, ys + 10),
        "nan input": lambda m, p, xs, ys: m.loss_and_grads(p, xs * float("nan"), ys),
        # named from the result (loss_and_grads makes no pass over the parameters), with and without checkpoints
        "nan parameter": lambda m, p, xs, ys: m.loss_and_grads({**p, "W": p["W"] * float("nan")}, xs, ys),
        "nan parameter, checkpoints": lambda m, p, xs, ys: m.loss_and_grads(
            {**p, "W": p["W"] * float("nan")}, xs, ys, checkpoints=2
        ),
        "xs dtype": lambda m, p, xs, ys: m.loss_and_grads(
            p, xs.astype(np.float32) if isinstance(xs, np.ndarray) else xs.float(), ys
        ),
        "window k": lambda m, p, xs, ys: m.loss_and_grads(p, xs, ys, truncate=("window", 0)),
        "truncate before xs": lambda m, p, xs, ys: m.loss_and_grads(p, xs[..., :1], ys, truncate=("window", 0)),
        "truncate mode": lambda m, p, xs, ys: m.loss_and_grads(p, xs, ys, truncate=("sometimes", 2)),
        "random pi": lambda m, p, xs, ys: m.loss_and_grads(p, xs, ys, truncate=("random", 1.5)),
    }


@pytest.mark.parametrize("case", list(bad_inputs()))
def test_bad_input_gets_the_numpy_modules_error(case):
    numpy_module, torch_module = modules("elman")
    rng = np.random.default_rng(0)
    params = numpy_module.init_params(rng, **SIZES)
    xs, ys = numpy_module.random_inputs(rng, T, B, **SIZES)
    with pytest.raises(ValueError) as expected:
        bad_inputs()[case](numpy_module, params, xs, ys)
    with pytest.raises(ValueError) as got:
        bad_inputs()[case](torch_module, tensors(params), torch.from_numpy(xs), torch.from_numpy(ys))
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("checkpoints", [None, 2])
def test_loss_and_grads_reads_finite_parameters_once(checkpoints, monkeypatch):
    """A call whose result is finite tests no parameter for nan and inf (its cost would grow with |theta|);
    backward does, before computing (check_finite=True)."""
    _, torch_module = modules("elman")
    params = torch_module.init_params(torch.Generator().manual_seed(0), **SIZES)
    xs, ys = torch_module.random_inputs(torch.Generator().manual_seed(0), T, B, **SIZES)
    scanned, checks = [], runtime_of(torch_module)
    finite, all_finite = checks._finite, checks._all_finite  # one array's scan; the parameters' at once
    monkeypatch.setattr(checks, "_finite", lambda a: scanned.append(a) or finite(a))
    monkeypatch.setattr(checks, "_all_finite", lambda arrays: scanned.extend(arrays) or all_finite(arrays))
    torch_module.loss_and_grads(params, xs, ys, checkpoints=checkpoints)
    assert not any(a is p for a in scanned for p in params.values())
    outputs, cache = torch_module.forward(params, xs)
    torch_module.backward(params, cache, outputs)
    assert any(a is p for a in scanned for p in params.values()), "the spy sees backward's scan"


def test_bad_input_names_torch_where_the_backends_differ():
    _, torch_module = modules("elman")
    params = torch_module.init_params(torch.Generator().manual_seed(0), **SIZES)
    xs, ys = torch_module.random_inputs(torch.Generator().manual_seed(0), T, B, **SIZES)
    with pytest.raises(ValueError, match=r"needs rng=torch\.Generator\(\)"):
        torch_module.loss_and_grads(params, xs, ys, truncate=("random", 0.5))
    with pytest.raises(ValueError, match="xs must be a torch tensor, got ndarray"):
        torch_module.forward(params, xs.numpy())
    with pytest.raises(ValueError, match="xs is on device meta; expected cpu like the parameters"):
        torch_module.forward(params, xs.to("meta"))
    with pytest.raises(ValueError, match="dtype must be float32 or float64, got torch.int32"):
        torch_module.Model(**SIZES, dtype=torch.int32)


def in_memory(model):
    """The NumPy and torch modules of a user's model, rendered and run in memory."""
    from bptt.codegen.numpy.render import module_source

    numpy_module, torch_module = types.ModuleType("user_numpy"), types.ModuleType("user_torch")
    exec(compile(module_source(model), "<numpy>", "exec"), numpy_module.__dict__)
    exec(compile(torch_render.module_source(model), "<torch>", "exec"), torch_module.__dict__)
    return numpy_module, torch_module


def user_problem(numpy_module, seed):
    rng = np.random.default_rng(seed)
    params = numpy_module.init_params(rng, **SIZES)
    xs, ys = numpy_module.random_inputs(rng, T, B, **SIZES)
    initial = {key: rng.standard_normal((B, SIZES[size])) for key, size in numpy_module.STATES.items()}
    return params, xs, ys, initial


def test_a_users_cell_with_stacked_weights_matches_numpy():
    """A user's model file (examples/torch_lstm.py: torch's stacked W_ih, W_hh, gates read as blocks):
    both backends' modules rendered in memory agree, full and windowed, forward mode included."""
    numpy_module, torch_module = in_memory(load(str(GENERATED.parent / "examples" / "torch_lstm.py") + ":lstm"))
    arrays = user_problem(numpy_module, 4)
    for truncate in (None, ("window", 2)):
        assert_grads_equal(
            run_torch(torch_module, arrays, truncate)[1],
            run_numpy(numpy_module, arrays, truncate)[1],
            1e-12,
            str(truncate),
        )
    rtrl = torch_module.forward_mode_grads(*map(tensors_of, arrays[:3]), **tensors(arrays[3]))
    assert_grads_equal(rtrl[1], run_numpy(numpy_module, arrays)[1], 1e-12, "forward mode")


def tensors_of(value):
    return tensors(value) if isinstance(value, dict) else torch.from_numpy(value)


GATES_WITHOUT_INPUTS = """
from sympy import HadamardProduct
from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.nodes import SquaredError, sigmoid, t, tanh


def cell(biased):
    d, h, q = sizes("d h q")
    W_z, W_g, U, V = matrix("W_z", h, h), matrix("W_g", h, h), matrix("U", h, d), matrix("V", q, h)
    b_z, b_g = vector("b_z", h), vector("b_g", h)
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    z, g = sequence("z", h, "intermediate"), sequence("g", h, "intermediate")
    o, y = sequence("o", q, "output"), sequence("y", q, "target")
    z_in, g_in = W_z * hidden(t - 1), W_g * hidden(t - 1)
    if biased:
        z_in, g_in = z_in + b_z, g_in + b_g
    return Model(
        name="gates", title="gates without input projections", source="a test", sizes=(d, h, q),
        params=(W_z, W_g, U, V) + ((b_z, b_g) if biased else ()), inputs=(x,),
        steps=((z, sigmoid(z_in)), (g, tanh(g_in)), (hidden, HadamardProduct(z(), g()) + U * x())),
        outputs=((o, V * hidden()),), loss=SquaredError(o(), y()),
    )


def biased():
    return cell(True)


def bare():
    return cell(False)
"""


def loop_calls(source, function):
    """The calls in the body of the first for-loop of a module's function, as code: `torch.matmul`."""
    tree = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function)
    loop = next(n for n in ast.walk(tree) if isinstance(n, ast.For))
    return [ast.unparse(n.func) for n in ast.walk(loop) if isinstance(n, ast.Call)]


@pytest.mark.parametrize("function", ["biased", "bare"])
def test_gates_without_input_projections_share_one_product(tmp_path, function):
    """Gates whose sums read W h_{t-1} plus biases only, or nothing else: still one product per step in the
    forward loop, written in place (added in, addmm_), and the NumPy module's gradients."""
    path = tmp_path / "gates.py"
    path.write_text(GATES_WITHOUT_INPUTS, encoding="utf-8")
    numpy_module, torch_module = in_memory(load(f"{path}:{function}"))
    calls = loop_calls(torch_render.module_source(load(f"{path}:{function}")), "_forward")
    products = [call for call in calls if call == "torch.matmul" or call.endswith(".addmm_")]
    assert len(products) == 1 and "torch.stack" not in calls, calls
    arrays = user_problem(numpy_module, 5)
    assert_grads_equal(run_torch(torch_module, arrays)[1], run_numpy(numpy_module, arrays)[1], 1e-12, function)
