"""The README's PyTorch and JAX examples run as written, and they train: the loss falls."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import functools
import importlib
import pathlib
import re

import jax
import torch  # the examples need both frameworks: a missing one fails here

from bptt.tests.support import xla

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def example(name):
    block = README[
        README.index(f"<!-- begin example: {name} -->") : README.index(
            "<!-- end example -->", README.index(f"<!-- begin example: {name} -->")
        )
    ]
    return re.search(r"```python\n(.*?)```", block, re.S).group(1)


def run(name, before):
    scope = {"torch": torch}
    exec(compile(before + example(name), f"<README {name} example>", "exec"), scope)
    return scope


def test_the_torch_example_trains():
    """The example's model is the first thing it draws from torch's generator: the same seed gives it back untrained."""
    scope = run("torch", "torch.manual_seed(0)\n")
    model, xs, ys = scope["model"], scope["xs"], scope["ys"]
    torch.manual_seed(0)
    untrained = scope["lstm_torch"].Model(d=8, h=32, q=4)
    with torch.no_grad():
        assert float(model.loss(model(xs), ys)) < 0.5 * float(untrained.loss(untrained(xs), ys))


@pytest.mark.slow(seconds=10)  # XLA compiles the example's LSTM whole; handed out early, not at the end of the run
def test_the_jax_example_trains(monkeypatch):
    """The example's jax.jit compiles as XLA does outside the tests, optimised (xla.OPTIMISED): the tests' flags
    compile fast for tiny arrays (tests/support/xla.py), and its 200 steps would run four times as long."""
    importlib.import_module("bptt.generated.lstm_jax")  # the module's own jitted functions made with jax.jit as is
    monkeypatch.setattr(jax, "jit", functools.partial(jax.jit, compiler_options=xla.OPTIMISED))
    scope = run("jax", "")
    monkeypatch.undo()
    lstm, xs, ys = scope["lstm"], scope["xs"], scope["ys"]
    start = lstm.init_params(jax.random.key(0), jax.numpy.float32, d=8, h=32, q=4)
    before, _ = lstm.loss_and_grads(start, xs, ys)
    after, _ = lstm.loss_and_grads(scope["params"], xs, ys)
    assert float(after) < 0.5 * float(before)
    assert set(scope["grads"]) >= set(lstm.PARAMS)
