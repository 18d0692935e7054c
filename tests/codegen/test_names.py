"""Every name a model can give is usable in every backend's module or refused in one line naming it.

Through the CLI (in process, for speed): `bptt codegen FILE:case --backend all --out DIR` and
`bptt check FILE:case` for a small Elman cell whose sequences, parameters and sizes take the names. Usable
names (every name the generated code uses itself, and names it makes from others: codegen/namer.py gives
the code's own names way) give modules that run and agree with the oracle (tests/support/oracle.py); a refused one
exits 2 with one line naming it, and nothing is written. And codegen/names.py's API cannot fall behind the
templates: every public name and argument of a generated module is listed there.
"""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import ast
import builtins
import importlib.util
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import torch

from bptt.app.cli import main
from bptt.codegen import names
from bptt.codegen.backends import BACKENDS
from bptt.codegen.printing.helpers import helpers
from bptt.derive.models import ZOO, load
from bptt.tests.support import oracle
from bptt.tests.support.jax_eager import on_device
from bptt.tests.support.named_cell import CELL

jax.config.update("jax_enable_x64", True)
GENERATED = pathlib.Path(__file__).resolve().parents[2] / "generated"

# The keyword of make() for each kind of name.
ROLE = {"input": "x", "intermediate": "a", "state": "h", "output": "o", "target": "y", "parameter": "W"}
ROLE |= {"input weights": "U", "vector": "b", "size": "d", "hidden size": "n"}

# The names codegen/names.py refused before the namer (1031550's RESERVED: FIXED | MODULES | BUILTINS)
# that are not the API's: each is now usable as a parameter, a sequence and a size.
OLD_RESERVED = """
    B BPTT CACHE MEAN Model PARAMS SHAPES SIZES STATES T TEACHER_FORCED XS_REQUIRES_GRAD adjoints ages apply
    append backward cache carry check_finite clip_grads ctx d_outputs device dim dims directions draws dtype first
    forward forward_mode_grads free_workspace given grads init_params init_rng initial inputs k keep keep_0 keep_next
    keep_t key loss loss_and_grads losses mode name named outputs params random_inputs residuals rng scale
    self shape shares sizes states t total truncate value where work x_key xs y_key ys zero
    CheckpointedBPTT after checkpoints following handed how itemsize kept like parts targets CompiledBPTT compile
    np numpy torch jax jnp lax math functools itertools numbers threading
    ValueError dict getattr int len range slice staticmethod super tuple zip
""".split()
FREED = sorted(set(OLD_RESERVED) - names.API - names.MODULE_ATTRIBUTES)
SLOTS = ("x", "a", "h", "o", "y", "U", "W", "V", "b")  # make()'s parameters and sequences (sizes apart)


# Four cells, each also a chain of 17 links (size s, parameter P of s rows, intermediate e = P e_before of s
# rows, after h_t), the output o_t = V h_t + P_last e_t: the names in turns, so that each freed name is a size,
# a parameter and a sequence in one cell or another (never two of them in one cell).
LINKS = -(-len(FREED) // 4)


def freed_cell(i):
    turn = [FREED[(LINKS * i + k) % len(FREED)] for k in range(len(FREED))]
    links = list(zip(turn[:LINKS], turn[LINKS : 2 * LINKS], turn[2 * LINKS : 3 * LINKS], strict=True))
    slots = dict(zip(SLOTS, turn[3 * LINKS :], strict=False))
    return slots | {"d": "d", "n": "h", "q": "q", "chain": links, "last": turn[3 * LINKS + len(SLOTS)]}


FREED_CELLS = [freed_cell(i) for i in range(4)]
# Names the code makes from another that another of the model's takes: h's adjoint, initial state, views;
# a's input projection; the sizes' n_X; the stacked blocks' and tangents' names.
MADE_CELLS = [
    dict(a="d_h", o="d_h0", y="h_t", U="h_prev", V="dot_h", b="d_h_in"),
    dict(U="n_h", V="along_W", b="units_n_h", a="along_h0", o="dot_W", d="n_q", x="h_next"),
]
# The API's functions and constants are a size's names too (a size is only ever a keyword argument).
MADE_CELLS[1] |= {
    "chain": [(size, f"P{i}", f"e{i}") for i, size in enumerate(sorted(names.API_FUNCTIONS))],
    "last": "P",
}
# The issue's cases: the second layer's size named k; attention-style parameters.
ISSUE_CELLS = [dict(layers=2, k="k"), dict(U="scale", W="key", V="value", b="mode", h="first")]
USABLE = [
    pytest.param(c, id="-".join(f"{k}={v}" for k, v in c.items() if k in SLOTS + ("k",)))
    for c in ISSUE_CELLS + MADE_CELLS + FREED_CELLS
]

# Still refused: not names Python can take as written (or would read as another), the API's words.
UNREADABLE = [("parameter", "lambda"), ("state", "None"), ("intermediate", "class"), ("vector", "_")]
UNREADABLE += [("parameter", "W-1"), ("state", "1h"), ("input weights", "\uff37"), ("size", "\u210c")]
API_WORDS = [("input", "xs"), ("target", "ys"), ("parameter", "params"), ("state", "forward"), ("size", "dtype")]
API_WORDS += [("size", "T"), ("output", "PARAMS"), ("vector", "loss_and_grads"), ("intermediate", "truncate")]
API_WORDS += [("hidden size", "rng"), ("parameter", "checkpoints"), ("state", "Model")]
API_WORDS += [("output", "h0"), ("parameter", "h0")]  # the state h's initial value: forward's keyword h0
# A parameter named as an attribute of torch's nn.Module (the torch Model's parameters are its attributes).
ATTRIBUTE = [("parameter", "eval"), ("vector", "to"), ("parameter", "type"), ("vector", "training")]
HIDING = [("parameter", "WQzq"), ("size", "Qzqd")]  # names holding the marker codegen hides names with
REFUSED = [pytest.param(role, name, id=f"{role}={name}") for role, name in UNREADABLE + API_WORDS + ATTRIBUTE + HIDING]


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


CONVERT = {"numpy": (np.asarray, np.asarray), "torch": (torch.from_numpy, lambda v: v.detach().numpy())}
CONVERT["jax"] = (on_device, np.asarray)


def agree(module, backend, model, params, xs, ys):
    """The module's loss and gradients against the oracle's (tests/support/oracle.py), at 1e-10: full BPTT, a window
    of 2 steps, in bounded memory (checkpoints=2), and forward mode (every code path of the module). A
    gradient's key is the parameter's name, or the module's for an initial state (module.STATES, in order)."""
    to, back = CONVERT[backend]
    theirs, data = {key: to(value) for key, value in params.items()}, (to(xs), to(ys))
    keys = {p.name: p.name for p in model.params} | dict(
        zip((f"{s.name}0" for s in model.states), module.STATES, strict=True)
    )
    full, window = oracle.run(model, params, xs, ys), oracle.run(model, params, xs, ys, truncate=("window", 2))
    runs = [
        ("full", module.loss_and_grads(theirs, *data), full),
        ("window", module.loss_and_grads(theirs, *data, truncate=("window", 2)), window),
        ("forward mode", module.forward_mode_grads(theirs, *data), full),
    ]
    if backend != "jax":  # JAX's checkpointed pass compiles for long; its names are its full pass's
        runs.append(("checkpoints", module.loss_and_grads(theirs, *data, checkpoints=2), full))
    for how, (loss, grads), expected in runs:
        what = f"{backend}, {how}"
        assert abs(float(loss) - expected.loss) <= 1e-10 * max(1.0, abs(expected.loss)), (what, loss, expected.loss)
        assert sorted(grads) == sorted(keys.values()), (what, sorted(grads))
        for key, grad in expected.grads.items():
            np.testing.assert_allclose(back(grads[keys[key]]), grad, rtol=1e-10, atol=1e-12, err_msg=f"{what}: {key}")


@pytest.mark.parametrize("choices", USABLE)
def test_names_the_code_uses_itself_or_makes_are_the_models_and_its_modules_agree_with_the_oracle(
    tmp_path, capsys, choices
):
    spec = cell(tmp_path, **choices)
    out = tmp_path / "out"
    out.mkdir()
    status, _, err = run(capsys, "codegen", spec, "--backend", "all", "--out", out)
    assert status == 0, err
    model, found = load(spec), modules(out)
    sizes = {size: 2 + i for i, size in enumerate(found["numpy"].SIZES)}
    params = found["numpy"].init_params(np.random.default_rng(0), **sizes)
    xs, ys = found["numpy"].random_inputs(np.random.default_rng(1), 3, 2, **sizes)
    for backend, module in found.items():
        assert module.PARAMS == tuple(p.name for p in model.params) and module.SIZES == tuple(sizes)
        agree(module, backend, model, params, xs, ys)
        source = (out / BACKENDS[backend].filename("cell")).read_text(encoding="utf-8")
        assert names.MARKER not in source
        bound_names = module_names(source, backend)[0]
        given = {v for k, v in choices.items() if k in SLOTS} or {"n_k"}  # the two layers: k's n_k
        assert given & bound_names, f"none of the model's names is a variable of the {backend} code"
    if "chain" not in choices:  # and `bptt check` (Ridders' differences against the NumPy module) agrees
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
        single = isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)  # not torch's glue line
        name = node.targets[0].id if single else getattr(node, "name", None)
        if name in own:
            top.add(name)
        else:
            inside |= bound(node)
            reads |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return top | inside, reads & set(dir(builtins)) - top - inside


SOURCES = [(name, ZOO[name]) for name in sorted(ZOO)] + [("torch_lstm", lambda: load("examples/torch_lstm.py:lstm"))]


def public_words(source, model):
    """Every name a user of the module writes: its public names, and the arguments of its public functions
    and of its public classes' public methods (but self and ctx, *args and **kwargs, and the model's own:
    its sizes, its initial states, its output's gradient d_X)."""
    tree = ast.parse(source)
    words, functions = set(), []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            words |= {t.id for t in node.targets if isinstance(t, ast.Name) and not t.id.startswith("_")}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            words.add(node.name)
            inner = [n for n in node.body if isinstance(n, ast.FunctionDef)] if isinstance(node, ast.ClassDef) else []
            functions += [node] if isinstance(node, ast.FunctionDef) else []
            functions += [n for n in inner if not n.name.startswith("_") or n.name == "__init__"]
    for function in functions:
        words |= {a.arg for a in function.args.posonlyargs + function.args.args + function.args.kwonlyargs}
    own = {s.name for s in model.sizes} | {f"{s.name}0" for s in model.states} | {f"d_{model.outputs[0][0].name}"}
    return words - own - {"self", "ctx"} - {"__init__"}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name, make", SOURCES, ids=[name for name, _ in SOURCES])
def test_every_public_name_and_argument_of_a_generated_module_is_the_apis(name, make, backend):
    """names.API cannot fall behind the templates: what a user writes by name is refused as a model's name."""
    model = make()
    path = GENERATED / BACKENDS[backend].filename(model.name)
    source = path.read_text(encoding="utf-8") if name in ZOO else BACKENDS[backend].module_source(model)
    assert names.MARKER not in source
    stray = sorted(public_words(source, model) - names.API)
    assert not stray, f"{path.name}'s public names and arguments not in codegen/names.py's API: {stray}"


def test_the_same_model_gives_the_same_bytes_whatever_the_hash_seed(tmp_path, capsys):
    """The namer's choices (which name yields, its other spelling) do not hang on set order: this process and one
    whose hash seed differs from this one's (this one's is random, or the PYTHONHASHSEED it was given) write the
    same torch module (the most code) for a cell where many names meet the code's."""
    spec = cell(tmp_path, **FREED_CELLS[0])
    here, other = tmp_path / "here", tmp_path / "other"
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    argv = [sys.executable, "-m", "bptt", "codegen", spec, "--backend", "torch", "--out", str(other)]
    subprocess.run(argv, check=True, capture_output=True, env=os.environ | {"PYTHONHASHSEED": seed})
    here.mkdir()
    assert run(capsys, "codegen", spec, "--backend", "torch", "--out", here)[0] == 0
    written = [{path.name: path.read_bytes() for path in sorted(out.iterdir())} for out in (here, other)]
    assert written[0] == written[1] and len(written[0]) == 1


def test_the_readme_lists_the_api():
    """The README's passage on names lists names.API as it is (its functions, then its arguments, sorted)."""
    readme = " ".join((GENERATED.parent / "README.md").read_text(encoding="utf-8").split())
    for words in (names.API_FUNCTIONS, names.API_ARGUMENTS):
        assert f"`{' '.join(sorted(words))}`" in readme


def test_the_code_never_writes_the_marker_itself():
    """The namer tells the model's names from the code's by MARKER: no template, printer or helper holds it."""
    root = pathlib.Path(names.__file__).parent
    holding = [p for p in root.rglob("*") if p.suffix in (".py", ".j2") and p.name != "names.py"]
    assert not [str(p) for p in holding if names.MARKER in p.read_text(encoding="utf-8")]


def test_the_torch_models_attributes_are_reserved_for_parameters():
    """Every attribute a torch Model has besides its parameters (nn.Module's and its own)."""
    from bptt.generated import elman_torch

    model = elman_torch.Model(d=2, h=3, q=4)
    attributes = {name for name in dir(model) if not name.startswith("_")} - set(elman_torch.PARAMS)
    assert attributes <= names.MODULE_ATTRIBUTES, sorted(attributes - names.MODULE_ATTRIBUTES)
