"""`bptt bench` runs, and checks every implementation's gradients before it times them.

A benchmark, not a test of speed: nothing here asserts a time. What is asserted is that the
table comes out, and that the peers compute the same loss and gradients as the generated module
(the naive per-step loop for every zoo model; hand-written NumPy, PyTorch and JAX where they
have the model and are installed), and that a peer that does not is caught and left untimed."""

import re

import numpy as np
import pytest

from bptt.app.bench import bench, calls, machine, measuring, peers, peers_jax, peers_torch
from bptt.derive.models import load
from bptt.tests.support.cli import bptt
from bptt.tests.support.modules import module_of
from bptt.tests.support.zoo import supporting

SIZES = (2, 3, 4)


def problem(name, dtype=np.float64, steps=4, batch=3):
    module = module_of(name)
    rng = np.random.default_rng(0)
    sizes = dict(zip(module.SIZES, SIZES, strict=True))
    params = module.init_params(rng, dtype, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, dtype, **sizes)
    initial = {
        key: (0.5 * rng.standard_normal((batch, sizes[size]))).astype(dtype) for key, size in module.STATES.items()
    }
    return module, params, xs, ys, initial


@pytest.mark.parametrize("name", supporting("bench"))
def test_numpy_peers_agree_with_the_generated_module(name):
    """The naive per-step loop (and, for the Elman RNNs, the hand-written one) give the generated
    module's loss and every gradient, initial states included, to 1e-12."""
    module, params, xs, ys, initial = problem(name)
    expected = module.loss_and_grads(params, xs, ys, **initial)
    found = peers.numpy_peers(load(name))
    assert "naive" in found
    for label, peer in found.items():
        result = peer(params, xs, ys, initial)
        if result is not None:  # GEMMs only computes no gradients
            assert measuring.disagreement(expected, result) <= 1e-12, f"{name}: {label}"


@pytest.mark.parametrize("library", [peers_torch, peers_jax], ids=["torch", "jax"])
@pytest.mark.parametrize("name", ["elman", "elman-onehot", "gru", "lstm", "lstm-layernorm"])
def test_framework_peers_agree_or_say_they_are_missing(library, name):
    """PyTorch's and JAX's versions of the model give the same loss and gradients (float64);
    without the library the bench says it is not installed."""
    module, params, xs, ys, initial = problem(name)
    model = load(name)
    found, notes = bench.implementations(model, module, (params, xs, ys, initial), ("torch", "jax"))
    label = "torch" if library is peers_torch else "jax"
    if not library.available():
        assert notes[label] == "not installed"
        return
    run, collect = found[label]
    assert measuring.disagreement(module.loss_and_grads(params, xs, ys, **initial), collect(run())) <= 1e-10


def test_a_peer_with_a_wrong_gradient_is_caught_and_not_timed(monkeypatch):
    """A naive peer whose dL/dW is 1.0001 times too large: its row says the gradients differ, it is
    not timed, and the bench's exit status is 1."""
    module, *_ = problem("elman")
    model = load("elman")
    naive = peers.Naive(model)

    def skewed(params, xs, ys, initial):
        loss, grads = naive(params, xs, ys, initial)
        return loss, {**grads, "W": grads["W"] * 1.0001}

    monkeypatch.setattr(peers, "numpy_peers", lambda model: {"naive": skewed})
    rows, _ = bench.run(model, module, dict(zip(module.SIZES, SIZES, strict=True)), 4, 3, np.float64, 1, ("naive",))
    row = next(row for row in rows if row.name == "naive")
    assert row.note.startswith("gradients differ") and 5e-5 < row.error < 2e-4
    assert row.median_ms != row.median_ms  # nan: not timed
    generated = next(row for row in rows if row.name == "generated")
    assert generated.median_ms > 0 and generated.ratio == 1


def test_disagreement_sees_the_loss_and_every_array():
    loss, grads = 2.0, {"a": np.array([1.0, -4.0]), "b": np.array([[3.0]])}
    assert measuring.disagreement((loss, grads), (loss, {k: v.copy() for k, v in grads.items()})) == 0
    assert measuring.disagreement((loss, grads), (2.002, grads)) == pytest.approx(1e-3)
    assert measuring.disagreement((loss, grads), (loss, {**grads, "b": np.array([[3.003]])})) == pytest.approx(1e-3)
    assert measuring.disagreement((loss, grads), (loss, {"a": grads["a"]})) == float("inf")


def test_the_measuring_process_has_one_thread_and_keeps_the_user_s_xla_flags():
    """BLAS and OpenMP on one thread, XLA's one-thread flag in place of the user's, their other flags kept (the
    tests' fast compiles reach bench's child); a file of flags (no leading "--") is replaced; applied twice, alike."""
    one = measuring.XLA_ONE_THREAD
    user = {"OMP_NUM_THREADS": "4", "XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_cpu_multi_thread_eigen=true --a=1"}
    env = measuring.single_threaded(user)
    assert env == {**measuring.THREADS, "XLA_FLAGS": f"--xla_dump_to=/tmp/x {one} --a=1"}
    assert measuring.single_threaded(env) == env
    assert measuring.single_threaded({"XLA_FLAGS": "flags.txt"})["XLA_FLAGS"] == one
    assert measuring.single_threaded({"PATH": "/bin"}) == {"PATH": "/bin", **measuring.THREADS}


def test_bench_command_prints_the_table():
    """`bptt bench` on tiny sizes, one round, the naive peer: a table per dtype with a row for the
    generated module (ratio 1.00) and one for the naive loop, which agrees; exit status 0. Its measuring process
    started fresh, as a user's is (the other tests' are forked from the invocation)."""
    args = ("--sizes", "d=2,h=3,q=4", "--steps", "3", "--batch", "2", "--repeats", "1", "--peers", "naive")
    result = bptt("bench", "elman", *args, fresh_children=True)
    assert result.returncode == 0, result.stdout + result.stderr
    for dtype in ("float64", "float32"):
        assert f"elman {dtype}: T=3 B=2 d=2, h=3, q=4" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(("generated  ", "naive  "))]
    assert [row[0] for row in rows] == ["generated", "naive"] * 2
    assert all(row[2] == "1.00" for row in rows if row[0] == "generated")
    assert all(float(row[-1]) <= measuring.TOLERANCE["float32"] for row in rows)
    assert "generated workspace" in result.stdout
    assert f"elman: {calls.model_calls(load('elman')).line()}" in result.stdout
    # forward: matmul, add, tanh; backward: matmul, add, times the slope 1 - h_t^2
    assert "calls per step: forward 3, backward 3" in result.stdout
    # the machine, so that a reader can scale the times: its processor and measured GEMM rates
    first = result.stdout.splitlines()[0]
    rates = re.fullmatch(
        r"machine: (.+); one-thread GEMM \(512\^3\) GFLOP/s: (\S+) \(float64\), (\S+) \(float32\) .*", first
    )
    assert rates and rates[1] == machine.processor(), first
    assert all(float(rate) > 0 for rate in rates.groups()[1:]), first


def test_gemm_rate_counts_two_n_cubed_flops(monkeypatch):
    """gemm_gflops is 2 n^3 flops over the median time: with a clock that advances 1 ms a reading,
    every product takes 1 ms."""
    clock = iter(range(10**6))
    monkeypatch.setattr(machine.time, "perf_counter", lambda: next(clock) * 1e-3)
    assert machine.gemm_gflops("float64", n=100) == pytest.approx(2 * 100**3 / 1e-3 / 1e9)


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_bench_times_a_framework_s_module_against_its_own(backend):
    """--backend torch (jax): the generated torch (JAX) module against the NumPy module and torch.nn.LSTM
    (jax.grad of a scan), every gradient agreeing before the timing."""
    result = bptt("bench", "lstm", "--backend", backend, "--sizes", "d=2,h=3,q=4", "--steps", "3", "--batch", "2",
                  "--repeats", "1", "--dtype", "float64")  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"lstm float64, generated for {backend}: T=3 B=2" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(("generated ", "numpy ", backend))]
    assert [row[0] for row in rows] == ["generated", "numpy", backend]
    assert all(float(row[-1]) <= 1e-12 for row in rows)


def test_bench_usage_errors_are_one_line():
    for args, words in (
        (("bench", "elman", "--peers", "numba"), "peers"),
        (("bench", "elman", "--dtype", "float16"), "dtypes"),
        (("bench", "nosuchmodel"), "unknown model"),
        (("bench", "elman", "--sizes", "d=2"), "missing"),
    ):
        result = bptt(*args)
        assert result.returncode == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1, args
