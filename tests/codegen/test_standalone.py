"""`bptt codegen --standalone`: a module that carries the runtime parts it calls instead of importing
bptt.runtime. For every zoo model in NumPy and torch, and three in JAX (CASES), the standalone module and the
importing one, as `bptt codegen` writes them, give bit-identical results, and the standalone one imports
nothing of bptt."""

import ast
import contextlib
import functools
import sys

import numpy as np
import pytest

from bptt.codegen.backends import BACKENDS
from bptt.codegen.printing.helpers import Helpers, runtime_files
from bptt.derive.models import load
from bptt.tests.support.cli import GENERATED, assert_ok, assert_user_error, bptt
from bptt.tests.support.modules import forward
from bptt.tests.support.zoo import WITH_REVERSE_STATES, supporting

T, B = 6, 2
SIZES = (2, 3, 4, 5)
CALLS = ({}, {"truncate": ("chunk", 2)}, {"truncate": ("window", 2)}, {"checkpoints": 3})


def bptt_imports(source):
    """The modules of bptt a module's source (or its parsed tree) imports."""
    found = []
    for node in statements(ast.parse(source) if isinstance(source, str) else source):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return sorted(name for name in found if name.split(".")[0] == "bptt")


def statements(tree):
    """Every statement of a parsed module, nested ones too: an import is a statement, which no expression holds."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            value = getattr(node, field, None)
            if isinstance(value, list):
                todo += value


@functools.cache
def sources(name, backend):
    """(the importing module's source, the standalone one's) of a zoo model, as `bptt codegen` writes them."""
    model = load(name)
    entry = BACKENDS[backend]
    return entry.module_source(model), entry.module_source(model, standalone=True)


def loaded(source, label):
    """A module of a source or its parsed tree (compiled as it is, not parsed again)."""
    module = type(sys)(label)
    exec(compile(source, f"<{label}>", "exec"), module.__dict__)
    return module


def generator(backend, seed):
    """The random source a backend's init_params and random_inputs take (its framework imported, or skipped)."""
    framework = pytest.importorskip(BACKENDS[backend].framework)
    if backend == "torch":
        return framework.Generator().manual_seed(seed)
    if backend == "jax":
        return framework.random.key(seed)
    return np.random.default_rng(seed)


def bits(value):
    """A result as NumPy arrays (dicts and tuples of them too), for a comparison bit for bit."""
    if isinstance(value, dict):
        return {key: bits(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(bits(item) for item in value)
    return np.asarray(value.detach() if hasattr(value, "detach") else value)


def assert_identical(expected, got):
    expected, got = bits(expected), bits(got)
    if isinstance(expected, dict):
        assert list(expected) == list(got)
        expected, got = tuple(expected.values()), tuple(got.values())
    if isinstance(expected, tuple):
        assert len(expected) == len(got)
        for one, other in zip(expected, got, strict=True):
            assert_identical(one, other)
        return
    assert expected.dtype == got.dtype and expected.shape == got.shape
    assert np.array_equal(expected, got, equal_nan=True)


# JAX compiles every call of both modules: three models that between them take every runtime path (labels,
# teacher forcing, gates), and those with reverse-time states (the sweeps runtime); NumPy and torch run every zoo model
CASES = [(name, backend) for name in supporting("standalone") for backend in sorted(BACKENDS)]
CASES = [
    (n, b) for n, b in CASES if b != "jax" or n in ("elman-onehot", "jordan", "lstm-peephole", *WITH_REVERSE_STATES)
]


def compiled_once(backend, folder):
    """JAX: the standalone module's programs that are the importing one's XLA computations are read back from
    JAX's compilation cache, not compiled again (tests/support/jax_cache.py: keyed by the computation, so the
    bits compared are those compiling again would give); the other backends compile nothing."""
    if backend != "jax":
        return contextlib.nullcontext()
    from bptt.tests.support.jax_cache import compiled_once

    return compiled_once(folder)


@pytest.mark.parametrize(("name", "backend"), CASES)
def test_a_standalone_module_imports_nothing_of_bptt_and_computes_the_same_bits(name, backend, tmp_path):
    with compiled_once(backend, tmp_path):
        same_bits(name, backend)


def same_bits(name, backend):
    importing, standalone = (ast.parse(source) for source in sources(name, backend))
    assert bptt_imports(standalone) == []
    assert bptt_imports(importing) and all(module.startswith("bptt.runtime.") for module in bptt_imports(importing))
    rng = generator(backend, 3)
    ours, theirs = loaded(importing, f"importing_{name}"), loaded(standalone, f"standalone_{name}")
    sizes = dict(zip(ours.SIZES, SIZES, strict=False))
    params = ours.init_params(rng, **sizes)
    xs, ys = ours.random_inputs(rng, T, B, **sizes)
    for keywords in supported(name, CALLS):
        assert_identical(
            ours.loss_and_grads(params, xs, ys, **keywords), theirs.loss_and_grads(params, xs, ys, **keywords)
        )
    outputs, cache = forward(ours, params, xs, ys)
    d_outputs = outputs * 0.5 - 1  # any gradient of the outputs
    for keywords in supported(name, ({}, {"truncate": ("chunk", 2), "checkpoints": 2})):
        assert_identical(
            ours.backward(params, cache, d_outputs, **keywords), theirs.backward(params, cache, d_outputs, **keywords)
        )
    if name in supporting("forward_mode_grads"):
        assert_identical(ours.forward_mode_grads(params, xs, ys), theirs.forward_mode_grads(params, xs, ys))


def supported(name, calls):
    """The calls (keywords) whose every keyword (truncate, checkpoints) the model supports, both together too."""
    both = {"truncate", "checkpoints"}
    features = [(*keywords, *(("truncated_checkpoints",) if both <= set(keywords) else ())) for keywords in calls]
    return [keywords for keywords, mine in zip(calls, features, strict=True) if name in supporting(*mine)]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_sweeps_runtime_redefines_no_name_of_the_rest(backend):
    """helpers(backend) reads the runtime of reverse-time states last, and a name's last definition wins: one
    that another runtime file defines too would replace it in every standalone module (jax_sweeps.py's apply
    function once replaced jax_passes.py's)."""
    rest = Helpers(*runtime_files(backend, sweeps=False)).definitions
    sweeps = set(Helpers(*runtime_files(backend)).definitions) - set(rest)
    every = Helpers(*runtime_files(backend)).definitions
    assert {name for name in rest if every[name].source != rest[name].source} == set()
    assert sweeps


def test_codegen_standalone_writes_a_module_of_its_framework_only(tmp_path):
    assert_ok(bptt("codegen", "linear", "--standalone", "--out", tmp_path))
    text = (tmp_path / "linear.py").read_text(encoding="utf-8")
    assert bptt_imports(text) == [] and "Generated by `bptt codegen linear --standalone`" in text
    assert_ok(bptt("codegen", "linear", "--standalone", "--check", "--out", tmp_path))
    stale = bptt("codegen", "linear", "--check", "--out", tmp_path)  # the importing module is another text
    assert stale.returncode == 1 and "linear.py" in stale.stdout + stale.stderr


def test_codegen_standalone_never_writes_over_the_zoo():
    before = (GENERATED / "linear.py").read_bytes()
    assert_user_error(bptt("codegen", "linear", "--standalone"), "--standalone", "--out DIR")
    assert (GENERATED / "linear.py").read_bytes() == before


def test_codegen_help_names_the_standalone_flag():
    result = bptt("codegen", "--help")
    assert_ok(result)
    assert "--standalone" in result.stdout and "only its framework" in " ".join(result.stdout.split())
