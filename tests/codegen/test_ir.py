"""The statement seam of codegen and what the NumPy backend makes of it: a module carries only the
helpers it calls, parentheses come from precedence, values are computed in place, gate products
are fused, backward stores and reads no more than it needs, and the workspace is kept per thread."""

import ast
import inspect
import sys
import threading

import numpy as np
import pytest
import sympy as sp

from bptt.codegen.printing.function_code import PRODUCT, SUM, Term, in_place
from bptt.codegen.printing.functions import NUMPY_FUNCTIONS
from bptt.codegen.printing.helpers import helpers
from bptt.codegen.printing.printer import RowPrinter
from bptt.codegen.printing.statements import InPlacePrinter
from bptt.codegen.program import JAX_PASSES, NUMPY_PASSES, TORCH_PASSES, rewritten, shared
from bptt.codegen.torch.functions import TORCH_FUNCTIONS
from bptt.derive.elementwise import FUNCTIONS
from bptt.derive.models import load
from bptt.derive.nodes import Diag, SeqAt, t, tanh
from bptt.tests.support.modules import module_of
from bptt.tests.support.zoo import supporting


def top_level(module):
    tree = ast.parse(inspect.getsource(module))
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.Assign)) and hasattr(node, "name")
    }


def called_names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


@pytest.mark.parametrize("name", supporting("one_program"))
def test_a_module_carries_only_the_helpers_it_calls(name):
    """Every private function of a generated module is read by some other definition in it (the model's passes
    over a segment of steps by the _Passes it hands the runtime)."""
    module = module_of(name)
    tree = ast.parse(inspect.getsource(module))
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    handed = {
        n.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for n in ast.walk(node.value)
        if isinstance(n, ast.Name)
    }
    for helper in (n for n in functions if n.startswith("_")):
        readers = [other for other, node in functions.items() if other != helper and helper in called_names(node)]
        readers += ["_PASSES"] if helper in handed else []
        assert readers, f"{name}: {helper} is defined but nothing calls it"


def test_helpers_follow_what_the_code_calls():
    """No zoo cell calls the sigmoid (the gated cells take it as a tanh of halved pre-activations, the
    peephole LSTM's with its peephole weights halved too) but lstm-layernorm, whose gates' pre-activations are
    norms' outputs (no weight to halve); only the softmax losses the fused cross-entropy."""
    for name in supporting("one_program"):
        module = module_of(name)
        assert hasattr(module, "_sigmoid") == (name == "lstm-layernorm"), name
        assert hasattr(module, "_softmax_cross_entropy") != hasattr(module, "_squared_error"), name
    chosen = helpers("numpy").closure(["_workspace"])
    assert [d.name for d in chosen] == ["_THREAD", "_workspace"]


def test_parentheses_come_from_precedence():
    h = sp.Symbol("h", integer=True, positive=True)
    z, n, a = (SeqAt(name, t, h, "intermediate") for name in ("z", "n", "a"))
    W = sp.MatrixSymbol("W", h, h)
    step = RowPrinter(stacked=False)
    assert step(sp.HadamardProduct(1 - z, n)) == "(1 - z[t]) * n[t]"
    assert step(W.T * (a + n)) == "(a[t] + n[t]) @ W"
    assert step(sp.HadamardProduct(a, sp.MatMul(W, a + n))) == "a[t] * ((a[t] + n[t]) @ W.T)"
    assert step(Diag(1 - z) * W.T * a) == "(1 - z[t]) * (a[t] @ W)"
    assert step(tanh(a + n)) == "np.tanh(a[t] + n[t])"
    assert step(sp.HadamardPower(a + n, 2)) == "(a[t] + n[t]) ** 2"


def test_library_calls_become_in_place_calls():
    """A function's code that is one call of a ufunc (or helper) taking out=, on the argument first and
    numbers after, gets out= as a keyword of the call; any other code is computed, then copied."""
    takes_out = InPlacePrinter(accepts_out=helpers("numpy").accepts_out).takes_out
    x = Term("a")

    def into_b(name):
        return in_place(NUMPY_FUNCTIONS.code(FUNCTIONS[name], x), x, "b", takes_out)

    assert into_b("tanh") == "np.tanh(a, out=b)"
    assert into_b("relu") == "np.maximum(a, 0, out=b)"
    assert into_b("sigmoid") == "_sigmoid(a, out=b)"
    assert into_b("silu") is None  # a product, not one call
    assert into_b("elu") is None  # np.where takes no out=
    assert into_b("softplus") is None  # np.logaddexp(0, a): the argument is not first
    assert into_b("leaky_relu") is None  # np.maximum(a, 0.01 * a): a computed second argument


def test_function_code_is_parenthesised_as_it_binds():
    """The tables' code of a compound argument: parentheses where Python's precedence needs them, no more."""
    product = Term("2 * a", PRODUCT)
    assert NUMPY_FUNCTIONS.code(FUNCTIONS["softsign"], product).text == "2 * a / (1 + np.abs(2 * a))"
    assert NUMPY_FUNCTIONS.code(FUNCTIONS["softsign'"], product).text == "1 / (1 + np.abs(2 * a)) ** 2"
    assert NUMPY_FUNCTIONS.code(FUNCTIONS["gelu"], product).text.startswith("0.5 * (2 * a) * (1 + np.tanh(")
    assert TORCH_FUNCTIONS.code(FUNCTIONS["step"], product).text == "(2 * a > 0).to((2 * a).dtype)"
    a, difference = Term("a"), Term("b - c", SUM)
    assert (a - difference).text == "a - (b - c)" and (difference - a).text == "b - c - a"
    assert (-(a**2)).text == "-a ** 2" and ((-a) ** 2).text == "(-a) ** 2"
    assert ((a > 0) > 0).text == "(a > 0) > 0" and (difference > 0).text == "b - c > 0"


def loop_calls(function):
    """The NumPy calls in the body of the first for-loop of a function, at a step t < T: the flow from the
    next segment of steps (`elif following:`, at the last step of a segment in bounded memory) is the other
    branch of the flow from step t+1, never run with it."""
    loop = next(n for n in ast.walk(ast.parse(inspect.getsource(function))) if isinstance(n, ast.For))
    for node in ast.walk(loop):
        if isinstance(node, ast.If) and node.orelse and ast.unparse(node.orelse[0]).startswith("if following:"):
            node.orelse = []
    return [ast.unparse(n.func) for n in ast.walk(loop) if isinstance(n, ast.Call)]


@pytest.mark.parametrize("name", ["lstm", "gru", "lstm-peephole"])
def test_gate_products_are_one_product_per_step(name):
    """Forward and backward each multiply by the stacked gate weights once per step, and the
    gates' weight gradients are rows of one product."""
    module = module_of(name)
    assert loop_calls(module._forward).count("np.dot") == 1
    assert loop_calls(module._adjoints).count("np.dot") == 1
    problem = module.random_inputs(np.random.default_rng(0), 3, 2, d=2, h=3, q=4)
    params = module.init_params(np.random.default_rng(1), d=2, h=3, q=4)
    _, grads = module.loss_and_grads(params, *problem)
    recurrent = [key for key in module.PARAMS if key.startswith(("W_h", "R_"))]
    owner = grads[recurrent[0]].base
    assert len(recurrent) >= 3 and owner is not None and all(grads[key].base is owner for key in recurrent)


def test_nothing_is_stored_that_backward_does_not_read():
    """The cache keeps states and the values backward reads: no pre-activation of a gate, no a_t of Elman."""
    assert list(module_of("elman").CACHE) == ["x", "h"]
    assert list(module_of("lstm").CACHE) == ["x", "c", "h", "i", "f", "g", "o"]
    assert not any(key.endswith("_bar") for key in module_of("gru").CACHE)


@pytest.mark.parametrize("name", supporting("one_program"))
def test_the_full_pass_has_no_age_axis(name):
    """Only window truncation carries an age axis: the fast adjoints never mention ages."""
    module = module_of(name)
    assert "ages" not in inspect.getsource(module._adjoints)
    assert "ages" not in inspect.getsource(module.backward)


def test_values_are_computed_in_place_in_the_loop():
    """Every NumPy call in Elman's loops writes into an array it is given (out=), or adds in place."""
    module = module_of("elman")
    for function in (module._forward, module._adjoints):
        loop = next(n for n in ast.walk(ast.parse(inspect.getsource(function))) if isinstance(n, ast.For))
        calls = [n for n in ast.walk(loop) if isinstance(n, ast.Call) and ast.unparse(n.func).startswith("np.")]
        assert calls and all(any(k.arg == "out" for k in call.keywords) for call in calls), function.__name__


def test_workspace_is_reused_per_thread_and_freed():
    module = module_of("elman")
    runtime = sys.modules[module.free_workspace.__module__]  # where each thread's arrays are kept
    params = module.init_params(np.random.default_rng(0), d=2, h=3, q=4)
    xs, ys = module.random_inputs(np.random.default_rng(1), 5, 2, d=2, h=3, q=4)
    module.free_workspace()
    first = module.loss_and_grads(params, xs, ys)
    held = {name: id(array) for name, (_, work) in runtime._THREAD.__dict__.items() for name, array in work.items()}
    again = module.loss_and_grads(params, xs, ys)
    assert held == {
        name: id(array) for name, (_, work) in runtime._THREAD.__dict__.items() for name, array in work.items()
    }
    assert first[0] == again[0] and all(np.array_equal(first[1][k], again[1][k]) for k in first[1])
    assert not any(np.shares_memory(first[1][k], again[1][k]) for k in first[1])  # fresh gradients every call
    other = {}
    thread = threading.Thread(
        target=lambda: other.update(result=module.loss_and_grads(params, xs, ys), held=dict(runtime._THREAD.__dict__))
    )
    thread.start()
    thread.join()
    assert other["result"][0] == first[0]
    assert not any(id(a) in set(held.values()) for _, work in other["held"].values() for a in work.values())
    module.free_workspace()
    assert runtime._THREAD.__dict__ == {}


def test_threads_computing_at_once_get_the_single_threaded_results():
    module = module_of("lstm")
    sizes = {"d": 3, "h": 5, "q": 4}
    problems = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        problems.append((module.init_params(rng, **sizes), *module.random_inputs(rng, 6, 3, **sizes)))
    expected = [module.loss_and_grads(*problem) for problem in problems]
    results = [None] * len(problems)

    def work(k):
        for _ in range(20):
            results[k] = module.loss_and_grads(*problems[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(problems))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for (loss, grads), (want_loss, want) in zip(results, expected, strict=True):
        assert loss == want_loss and all(np.array_equal(grads[k], want[k]) for k in want)


@pytest.mark.parametrize("name", ["linear", "elman-jordan", "gru"])
def test_programs_are_deterministic(name):
    """Building the statements twice, past shared's memo, gives equal Programs (regeneration is byte-identical;
    test_seam.py builds them under other hash seeds too)."""
    first, second = shared.__wrapped__(load(name)), shared.__wrapped__(load(name))
    assert first is not second and first.forward is not second.forward
    assert first == second
    for passes in (NUMPY_PASSES, TORCH_PASSES, JAX_PASSES):  # each backend's own passes too
        assert rewritten(first, passes) == rewritten(second, passes)
