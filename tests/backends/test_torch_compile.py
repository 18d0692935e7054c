"""compile=True (issue 18): the torch module runs each step of its loops through torch.compile, and gives
the default path's loss and gradients (float64, to 1e-12) in loss_and_grads and through Model's
loss.backward(); bad values of the option, and a torch.compile that is not there or cannot compile, are
one-line errors. On CPU (the only device tested) inductor needs a C++ compiler and compiles the two step
functions of a model once, 10 s with its cache on disk and about 40 s without on this machine: only the
LSTM is compiled here. Elman's step functions, printed by the same printer, run uncompiled and agree with
the default path, as the LSTM's do. Not measured on a GPU."""

import pytest

torch = pytest.importorskip("torch", reason="the torch backend's tests need torch")

from test_backend_torch import SIZES, B, T, assert_grads_equal

from bptt.generated import elman_torch, lstm_torch
from bptt.tests.support.modules import runtime_of

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # inductor


def problem(module, dtype=torch.float64):
    generator = torch.Generator().manual_seed(0)
    params = module.init_params(generator, dtype, **SIZES)
    xs, ys = module.random_inputs(generator, T, B, dtype, **SIZES)
    return params, xs, ys


def one_line_error(kind, call):
    with pytest.raises(kind) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    return message


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_compile_takes_true_or_false(bad):
    params, xs, ys = problem(lstm_torch)
    message = one_line_error(ValueError, lambda: lstm_torch.loss_and_grads(params, xs, ys, compile=bad))
    assert message == f"compile must be True or False, got {bad!r}"
    one_line_error(ValueError, lambda: lstm_torch.Model(**SIZES, compile=bad))


def test_compile_does_not_combine_with_checkpoints():
    params, xs, ys = problem(lstm_torch)
    call = lambda: lstm_torch.loss_and_grads(params, xs, ys, checkpoints=2, compile=True)  # noqa: E731
    assert "does not combine with checkpoints" in one_line_error(ValueError, call)


def test_without_torch_compile_the_option_is_one_error(monkeypatch):
    monkeypatch.setattr(runtime_of(lstm_torch, "_check_compile"), "_COMPILED", {})
    monkeypatch.delattr(torch, "compile")
    params, xs, ys = problem(lstm_torch)
    message = one_line_error(RuntimeError, lambda: lstm_torch.loss_and_grads(params, xs, ys, compile=True))
    assert message.startswith("compile=True needs torch.compile (torch 2.0 or later)")


def test_a_torch_compile_that_refuses_the_platform_is_one_error(monkeypatch):
    def refusing(*args, **keywords):
        raise RuntimeError("torch.compile is not supported on Python 3.99+\n(more lines)")

    monkeypatch.setattr(runtime_of(lstm_torch, "_check_compile"), "_COMPILED", {})
    monkeypatch.setattr(torch, "compile", refusing)
    params, xs, ys = problem(lstm_torch)
    message = one_line_error(RuntimeError, lambda: lstm_torch.loss_and_grads(params, xs, ys, compile=True))
    assert message == "compile=True: torch.compile is not available: torch.compile is not supported on Python 3.99+"


def test_a_backend_that_cannot_compile_is_one_error(monkeypatch):
    """The compiler's own failure (inductor without a C++ compiler, say) comes when the first step runs."""
    real = torch.compile

    def failing(*args, **keywords):
        def backend(graph, example_inputs):
            raise RuntimeError("no working C++ compiler found")

        return real(*args, **{**keywords, "backend": backend})

    monkeypatch.setattr(runtime_of(elman_torch, "_check_compile"), "_COMPILED", {})
    monkeypatch.setattr(torch, "compile", failing)
    params, xs, ys = problem(elman_torch)
    message = one_line_error(RuntimeError, lambda: elman_torch.loss_and_grads(params, xs, ys, compile=True))
    assert message.startswith("compile=True: torch.compile cannot compile _forward_step: ")
    assert "no working C++ compiler found" in message


@pytest.mark.parametrize("module", [elman_torch, lstm_torch], ids=["elman", "lstm"])
def test_the_step_functions_run_as_written_give_the_default_path(module, monkeypatch):
    """The step functions that compile=True hands to torch.compile, run without compiling: the default
    path's gradients, full and randomly truncated (steps t < T of the backward loop, every forward step)."""
    monkeypatch.setattr(module, "_compiled", lambda step: step)
    params, xs, ys = problem(module)
    for truncate in (None, ("random", 0.5)):
        expected = module.loss_and_grads(params, xs, ys, truncate=truncate, rng=torch.Generator().manual_seed(3))
        got = module.loss_and_grads(
            params, xs, ys, truncate=truncate, rng=torch.Generator().manual_seed(3), compile=True
        )
        assert float(got[0]) == float(expected[0])
        assert_grads_equal(got[1], expected[1], 1e-12, f"{module.__name__} {truncate}")


@pytest.mark.slow  # inductor compiles two step functions: 10 s with its cache on disk, about 40 s without
def test_compiled_steps_give_the_default_path():
    """The LSTM through torch.compile: loss_and_grads full and randomly truncated, and Model(compile=True)'s
    loss.backward(), equal the default path's to 1e-12 (float64). Each step function compiles once: the flows'
    weights (1, then 0 and 1/pi) are an input of the compiled step, not a value it is compiled for."""
    frames = dict(torch._dynamo.utils.counters["frames"])
    params, xs, ys = problem(lstm_torch)
    for truncate in (None, ("random", 0.5)):
        expected = lstm_torch.loss_and_grads(params, xs, ys, truncate=truncate, rng=torch.Generator().manual_seed(3))
        got = lstm_torch.loss_and_grads(
            params, xs, ys, truncate=truncate, rng=torch.Generator().manual_seed(3), compile=True
        )
        assert float(got[0]) == pytest.approx(float(expected[0]), rel=1e-12)
        assert_grads_equal(got[1], expected[1], 1e-12, f"lstm {truncate}")
    grads = []
    for compile in (False, True):
        model = lstm_torch.Model(**SIZES, init_rng=torch.Generator().manual_seed(0), compile=compile)
        model.loss(model(xs), ys).backward()
        grads.append({name: parameter.grad for name, parameter in model.named_parameters()})
    assert_grads_equal(grads[1], grads[0], 1e-12, "Model(compile=True)")
    compiled = torch._dynamo.utils.counters["frames"]["ok"] - frames.get("ok", 0)
    assert compiled <= 2, f"{compiled} frames compiled for the two step functions"
