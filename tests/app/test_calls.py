"""The calls per step of the generated modules' recursion loops (app/bench/calls.py): counted right on a
module written here, and, for every zoo cell, no more than the branches that brought them down left them."""

import pathlib
import types

import pytest

from bptt.app.bench.calls import StepCalls, model_calls, module_calls, step_calls
from bptt.codegen.backends import BACKENDS
from bptt.derive.models import load
from bptt.tests.support.zoo import supporting

ROOT = pathlib.Path(__file__).parents[2]

# (forward, backward) calls per step, None where there is no loop, of the NumPy and the torch modules: at most
# these, the counts when the passes of codegen/passes/collapse.py, split.py and collect.py came in, and torch's
# when its loops' sums became one in-place call a term (codegen/torch/sums.py)
BOUNDS = {  # name: (NumPy's, torch's)
    "elman": ((3, 3), (2, 2)),
    "elman-jordan": ((3, 3), (2, 2)),
    "elman-onehot": ((3, 3), (2, 2)),
    "gru": ((11, 7), (8, 5)),
    "jordan": ((None, None), (None, None)),
    "linear": ((2, 2), (1, 1)),
    "lstm": ((10, 9), (7, 7)),
    "lstm-peephole": ((19, 9), (12, 7)),
    # NumPy's: its norms' parts in place, each centre once, each mean one np.dot, its biases summed before the loop,
    # its gates kept activated, f, i, o one sigmoid; backward: its input's norm after the loop, its gates' slopes
    # before it. torch's: its norms' parts by the runtime's in-place helpers
    "lstm-layernorm": ((27, 10), (12, 17)),
}

MODULE = """
import numpy as np

def _affine(z, out):
    np.multiply(z, 2.0, out=out)
    out -= 1.0
    return -out

def _forward(params, x, h, T):
    W = params["W"]
    for t in range(1, T + 1):
        h_t, h_prev = h[t], h[t - 1]
        np.matmul(h_prev, W, out=h_t)
        _affine(h_t, out=h_t)
        h_t[...] = h_t * x[t - 1] - h_prev
        if t < T:
            np.add(h_t, 1, out=h_t)
            if keep is not None:
                h_t *= keep[t]

def _adjoints(keep, d_h, T):
    return d_h
"""


def test_a_step_is_counted_call_by_call():
    """matmul 1, the helper's body 3 (a call, an operator in place, a negation), the copy of a product minus
    a view 3, the add of a step t < T 1; the weighting of a truncated run not; indices (t - 1) not. A pass
    with no loop: None."""
    assert step_calls(MODULE) == StepCalls(forward=8, backward=None)


def test_a_test_the_count_cannot_decide_is_an_error():
    source = MODULE.replace("if t < T:", "if t > 3:")
    with pytest.raises(ValueError, match="cannot decide `t > 3`"):
        step_calls(source)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name", supporting("one_program"))
def test_the_zoo_s_loops_make_no_more_calls_than_before(name, backend):
    """Each generated module's loops, as written in generated/, make at most BOUNDS calls per step."""
    path = ROOT / "generated" / BACKENDS[backend].filename(name)
    counted = step_calls(path.read_text())
    forward, backward = BOUNDS[name][backend == "torch"]
    for kind, count, bound in (("forward", counted.forward, forward), ("backward", counted.backward, backward)):
        assert (count is None) == (bound is None), f"{name} {backend}: {kind} loop {count}, bound {bound}"
        assert count is None or count <= bound, f"{name} {backend}: {kind} loop makes {count} calls per step"


def test_the_peephole_lstm_s_gates_go_through_one_tanh():
    """The forward step of the peephole LSTM: one tanh for z, i and f (their peephole terms added first),
    one for o, one for c_t; no _sigmoid helper left in the loop."""
    source = (ROOT / "generated" / "lstm_peephole.py").read_text()
    loop = source[source.index("def _forward(") :].split("for t in range(1, T + 1):")[1].split("\n    # s_t")[0]
    assert loop.count("np.tanh(") == 3 and "_sigmoid(" not in loop
    assert "np.tanh(_z_i_f_t, out=_z_i_f_t)" in loop


def test_bench_counts_the_module_it_measures(tmp_path):
    """module_calls reads a zoo module's own file (one call added there is counted) rather than printing it again;
    a module run from printed source (no file) is counted as codegen prints it."""
    model, source = load("elman"), (ROOT / "generated" / "elman.py").read_text()
    step = "        np.tanh(h_t, out=h_t)\n"
    assert source.count(step) == 1
    path = tmp_path / "elman.py"
    path.write_text(source.replace(step, step * 2), encoding="utf-8")
    printed = model_calls(model)
    assert module_calls(model, types.SimpleNamespace(__file__=str(path))) == StepCalls(
        printed.forward + 1, printed.backward
    )
    assert module_calls(model, types.ModuleType("elman")) == printed
