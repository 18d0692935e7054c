"""Every name a model can give is usable in every backend's module or refused in one line naming it.

Through the CLI (in process, for speed): `bptt codegen FILE:case --backend all --out DIR` and
`bptt check FILE:case` for a small Elman cell whose sequence, parameter or size takes the name. A
usable name gives modules that run and whose gradients agree with the NumPy module's; a refused one
exits 2 with one line naming it, and nothing is written. And codegen/names.py cannot fall behind
the templates: every name a generated module binds is listed there or made from the model's names.
"""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import ast
import builtins
import importlib.util
import os
import pathlib
import textwrap

# XLA's compile time dominates the JAX runs (tiny arrays); as tests/backends/test_backend_jax.py.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
).strip()

import jax
import jax.numpy as jnp
import numpy as np
import torch

from bptt.app.cli import main
from bptt.codegen import names
from bptt.codegen.backends import BACKENDS
from bptt.codegen.printing.helpers import helpers
from bptt.derive.models import ZOO, load

jax.config.update("jax_enable_x64", True)
GENERATED = pathlib.Path(__file__).resolve().parents[2] / "generated"

CELL = textwrap.dedent(
    '''
    """An Elman cell whose names a test chooses."""

    import dataclasses

    from bptt.derive.model import Model, matrix, sequence, sizes, vector
    from bptt.derive.nodes import SquaredError, t, tanh


    def make(x="x", a="a", h="h", o="o", y="y", U="U", W="W", V="V", b="b", d="d", n="h", q="q", twice=None):
        d, n, q = sizes([d, n, q])
        U, W, V, b = matrix(U, n, d), matrix(W, n, n), matrix(V, q, n), vector(b, n)
        x, a, h = sequence(x, d, "input"), sequence(a, n, "intermediate"), sequence(h, n, "state")
        o, y = sequence(o, q, "output"), sequence(y, q, "target")
        model = Model(
            name="cell",
            title="An Elman cell",
            source="tests/codegen/test_names.py",
            sizes=(d, n, q),
            params=(U, W, V, b),
            inputs=(x,),
            steps=((a, U * x() + W * h(t - 1) + b), (h, tanh(a()))),
            outputs=((o, V * h()),),
            loss=SquaredError(o(), y()),
        )
        if twice == "parameter":
            return dataclasses.replace(model, params=model.params + (W,))
        if twice == "size":
            return dataclasses.replace(model, sizes=model.sizes + (n,))
        if twice == "step":
            return dataclasses.replace(model, steps=model.steps + ((h, tanh(a())),))
        return model
    '''
)
# The keyword of make() for each kind of name.
ROLE = {"input": "x", "intermediate": "a", "state": "h", "output": "o", "target": "y", "parameter": "W"}
ROLE |= {"input weights": "U", "vector": "b", "size": "d", "hidden size": "n"}

# (role, name): the generated code uses the name itself, or its module does (a framework, a builtin it calls).
TAKEN = [("state", "work"), ("parameter", "torch"), ("parameter", "jnp"), ("parameter", "jax")]
TAKEN += [("parameter", "np"), ("vector", "numpy"), ("intermediate", "lax"), ("state", "math")]
TAKEN += [("input", "T"), ("target", "B"), ("intermediate", "t"), ("state", "keep"), ("output", "sizes")]
TAKEN += [("parameter", "params"), ("state", "cache"), ("parameter", "dtype"), ("vector", "device")]
TAKEN += [("intermediate", "keep_t"), ("parameter", "forward"), ("state", "losses"), ("output", "PARAMS")]
TAKEN += [("intermediate", "STATES"), ("parameter", "init_params"), ("state", "BPTT"), ("vector", "Model")]
TAKEN += [("parameter", "range"), ("state", "zip"), ("intermediate", "len"), ("vector", "super")]
TAKEN += [("size", "T"), ("size", "rng"), ("hidden size", "dtype"), ("size", "self"), ("size", "name")]
# A name the code makes from another: h's loop views and initial state, a's adjoint and input projection.
MADE = [("parameter", "h_t"), ("vector", "h_prev"), ("parameter", "h0"), ("vector", "d_a"), ("parameter", "a_in")]
MADE += [("parameter", "n_h"), ("vector", "d_h0"), ("parameter", "dot_h")]
# Not names Python can take as written, or would read as another.
UNREADABLE = [("parameter", "lambda"), ("state", "None"), ("intermediate", "class"), ("vector", "_")]
UNREADABLE += [("parameter", "W-1"), ("state", "1h"), ("input weights", "\uff37"), ("size", "\u210c")]
# A parameter named as an attribute of torch's nn.Module (the torch Model's parameters are its attributes).
ATTRIBUTE = [("parameter", "eval"), ("vector", "to"), ("parameter", "type"), ("vector", "training")]
REFUSED = [pytest.param(role, name, id=f"{role}={name}") for role, name in TAKEN + MADE + UNREADABLE + ATTRIBUTE]
# Soft keywords, builtins the code never calls, torch's own names, names the sizes share with sequences.
USABLE = [("state", "match"), ("parameter", "case"), ("state", "type"), ("intermediate", "input")]
USABLE += [("vector", "sum"), ("input", "id"), ("output", "max"), ("target", "min"), ("parameter", "W_in")]
USABLE += [("parameter", "\u03b8"), ("size", "x"), ("hidden size", "a")]


def cell(tmp_path, **choices):
    """FILE:case for the cell with these choices."""
    path = tmp_path / "cell.py"
    path.write_text(CELL + f"\n\ndef case():\n    return make(**{choices!r})\n", encoding="utf-8")
    return f"{path}:case"


def run(capsys, *argv):
    """(exit status, stdout, stderr) of `bptt ARGV`, in process."""
    status = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_refused(result, name):
    status, out, err = result
    assert status == 2, (status, out, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert repr(name) in err, f"{name!r} not named in {err!r}"


@pytest.mark.parametrize("role, name", REFUSED)
def test_a_name_the_code_cannot_use_is_refused_naming_it(tmp_path, capsys, role, name):
    spec = cell(tmp_path, **{ROLE[role]: name})
    out = tmp_path / "out"
    out.mkdir()
    assert_refused(run(capsys, "codegen", spec, "--backend", "all", "--out", out), name)
    assert not list(out.iterdir())
    assert_refused(run(capsys, "check", spec), name)


@pytest.mark.parametrize("twice", ["parameter", "size", "step"])
def test_a_name_given_twice_is_refused(tmp_path, capsys, twice):
    spec = cell(tmp_path, twice=twice)
    status, _, err = run(capsys, "codegen", spec, "--backend", "all", "--out", tmp_path)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert {"parameter": "'W' is listed 2 times", "size": "'h' is listed 2 times", "step": "'h' is assigned 2"}[
        twice
    ] in err


def test_a_parameter_and_a_sequence_of_one_name_are_refused(tmp_path, capsys):
    assert_refused(run(capsys, "codegen", cell(tmp_path, W="h"), "--out", tmp_path), "h")


def test_two_sequences_of_one_name_are_refused(tmp_path, capsys):
    status, _, err = run(capsys, "codegen", cell(tmp_path, a="h"), "--out", tmp_path)
    assert status == 2 and "two sequences are named 'h' (intermediate of h rows and state of h rows)" in err


def modules(folder):
    """The three modules bptt codegen wrote for the cell, imported."""
    found = {}
    for backend, entry in BACKENDS.items():
        path = folder / entry.filename("cell")
        spec = importlib.util.spec_from_file_location(f"cell_{backend}_{folder.name}", path)
        found[backend] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(found[backend])
    return found


@pytest.mark.parametrize("role, name", [pytest.param(r, n, id=f"{r}={n}") for r, n in USABLE])
def test_a_usable_name_gives_modules_that_agree(tmp_path, capsys, role, name):
    spec = cell(tmp_path, **{ROLE[role]: name})
    out = tmp_path / "out"
    out.mkdir()
    status, _, err = run(capsys, "codegen", spec, "--backend", "all", "--out", out)
    assert status == 0, err
    found = modules(out)
    numpy_module = found["numpy"]
    sizes = {size: 2 + i for i, size in enumerate(numpy_module.SIZES)}
    params = numpy_module.init_params(np.random.default_rng(0), **sizes)
    xs, ys = numpy_module.random_inputs(np.random.default_rng(1), 3, 2, **sizes)
    loss, grads = numpy_module.loss_and_grads(params, xs, ys)
    converted = {"torch": torch.from_numpy, "jax": jnp.asarray}
    for backend, convert in converted.items():
        other_loss, other = found[backend].loss_and_grads(
            {k: convert(v) for k, v in params.items()}, convert(xs), convert(ys)
        )
        assert abs(float(other_loss) - loss) <= 1e-12 * abs(loss)
        assert sorted(other) == sorted(grads)
        for key, grad in grads.items():
            np.testing.assert_allclose(np.asarray(other[key]), grad, rtol=1e-10, atol=1e-13, err_msg=f"{backend} {key}")
    sources = {
        backend: (out / entry.filename("cell")).read_text(encoding="utf-8") for backend, entry in BACKENDS.items()
    }
    bound_names = set().union(*(module_names(source, backend)[0] for backend, source in sources.items()))
    own = {code for code, meanings in names.code_names(load(spec)).items() if any(repr(name) in m for m in meanings)}
    assert (own | {name}) & bound_names, f"neither {name!r} nor a name made from it is a variable of the code"
    status, out_text, err = run(capsys, "check", spec)
    assert status == 0 and "all gradients agree with finite differences" in out_text, err


def bound(node):
    """Every name a statement binds, in it and in any function or class inside it."""
    found = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and isinstance(inner.ctx, (ast.Store, ast.Del)):
            found.add(inner.id)
        elif isinstance(inner, ast.arg):
            found.add(inner.arg)
        elif isinstance(inner, (ast.FunctionDef, ast.ClassDef)):
            found.add(inner.name)
        elif isinstance(inner, ast.alias):
            found.add((inner.asname or inner.name).partition(".")[0])
    return found


def module_names(source, backend):
    """(every name a module binds at module level or in a function it prints, the builtins its printed
    code reads). A helper's own locals are left out: its code never meets a model's names."""
    own = helpers(backend).definitions
    top, inside, reads = set(), set(), set()
    for node in ast.parse(source).body:
        name = node.targets[0].id if isinstance(node, ast.Assign) else getattr(node, "name", None)
        if name in own:
            top.add(name)
        else:
            inside |= bound(node)
            reads |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return top | inside, reads & set(dir(builtins)) - top - inside


SOURCES = [(name, ZOO[name]) for name in sorted(ZOO)] + [("torch_lstm", lambda: load("examples/torch_lstm.py:lstm"))]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name, make", SOURCES, ids=[name for name, _ in SOURCES])
def test_every_name_a_generated_module_binds_is_reserved_or_made_from_the_models(name, make, backend):
    model = make()
    path = GENERATED / BACKENDS[backend].filename(model.name)
    source = path.read_text(encoding="utf-8") if name in ZOO else BACKENDS[backend].module_source(model)
    bound_names, builtin_reads = module_names(source, backend)
    made = set(names.code_names(model)) | {size.name for size in model.sizes}
    numbered = {n for n in bound_names if n.startswith(names.PREFIXES)}
    stray = sorted(n for n in bound_names - made - names.RESERVED - numbered if not n.startswith("_"))
    assert not stray, f"{path.name} binds names codegen/names.py does not reserve: {stray}"
    assert builtin_reads <= names.BUILTINS, f"builtins not in names.BUILTINS: {sorted(builtin_reads - names.BUILTINS)}"
    assert not set(names.code_names(model)) & names.RESERVED  # the zoo's names are all usable


def test_the_torch_models_attributes_are_reserved_for_parameters():
    """Every attribute a torch Model has besides its parameters (nn.Module's and its own)."""
    from bptt.generated import elman_torch

    model = elman_torch.Model(d=2, h=3, q=4)
    attributes = {name for name in dir(model) if not name.startswith("_")} - set(elman_torch.PARAMS)
    assert attributes <= names.MODULE_ATTRIBUTES, sorted(attributes - names.MODULE_ATTRIBUTES)
