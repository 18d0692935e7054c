"""The runtime's files are real modules: each imports on its own and its functions run (more in
tests/runtime/), and the splitter (codegen/printing/helpers.py) gives a generated module the import lines
of the definitions it calls, or, standalone, copies those and the definitions they call, never the files'
imports of each other."""

import ast
import importlib
import pathlib

import numpy as np
import pytest

from bptt.codegen.backends import BACKENDS
from bptt.codegen.printing.helpers import helpers, runtime_files

GENERATED = pathlib.Path(__file__).resolve().parents[2] / "generated"


def helpers_module(backend):
    """bptt.runtime.<backend>, imported (its framework too: skipped if that is missing)."""
    pytest.importorskip(BACKENDS[backend].framework)
    return importlib.import_module(f"bptt.runtime.{backend}")


def test_the_common_runtime_runs_alone():
    common = importlib.import_module("bptt.runtime.common")
    assert common._is_count(np.int64(3)) and not common._is_count(True)
    assert common._extent("4*h", {"h": 3}) == 12
    assert common._bind_sizes(common._Spec((), (), {}, {}, {}), {}, ()) == ({}, None)
    with pytest.raises(ValueError, match=r"has shape \(2, 0\); every dimension must be at least 1"):
        common._check_shape("x", (2, 0), ("B", "h"), {})


def test_the_torch_helpers_run_alone():
    torch_helpers = helpers_module("torch")
    import torch

    grads = {"W": torch.full((2, 3), 2.0, dtype=torch.float64), "b": torch.full((3,), 2.0, dtype=torch.float64)}
    clipped = torch_helpers.clip_grads(grads, 3.0)
    assert all(torch.allclose(clipped[key], grads[key] / 2) for key in grads)
    like = torch.zeros(4, 2, dtype=torch.float64)
    placed = torch_helpers._placed(like, ((slice(1, 3),), torch.ones(2, 2, dtype=torch.float64)))
    assert placed.sum().item() == 4 and placed[0].abs().sum().item() == 0


def test_the_jax_helpers_run_alone():
    jax_helpers = helpers_module("jax")
    import jax.numpy as jnp

    values = jnp.arange(1.0, 5.0)
    assert jax_helpers._following(values).tolist() == [2.0, 3.0, 4.0, 0.0]
    clipped = jax_helpers.clip_grads({"b": jnp.full(4, 3.0)}, 3.0)  # norm 6
    assert clipped["b"].tolist() == [1.5] * 4


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_splitter_copies_no_import_of_another_runtime_file(backend):
    chosen = helpers(backend)
    assert not {"PARAMS", "SIZES", "SHAPES", "CACHE", "TYPE_CHECKING"} & chosen.definitions.keys()
    imports, source = chosen.source(sorted(chosen.definitions))
    assert "from bptt" not in "\n".join(imports) + source
    assert "def _check_g_max(" in source  # the shared file's definitions are copied themselves
    imports, source = chosen.source(["_check_params", "clip_grads"], standalone=False)
    home = next(path.stem for path in runtime_files(backend) if "\ndef _check_params(" in path.read_text())
    assert source == "" and f"from bptt.runtime.{home} import _check_params" in imports[-1]
    assert "from bptt.runtime.common import _check_g_max" not in imports[-1]  # called by clip_grads, not the module


def top_level(tree):
    """name -> node of each function, assignment and import from bptt at a module's top level."""
    named = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module.startswith("bptt."):
            named.update((alias.asname or alias.name, node) for alias in node.names)
        elif isinstance(node, ast.FunctionDef):
            named[node.name] = node
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            named[node.targets[0].id] = node
    return named


def read_names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


MODULES = sorted(path.name for path in GENERATED.glob("*.py") if path.name != "__init__.py")


@pytest.mark.parametrize("filename", MODULES)
def test_every_private_helper_a_generated_module_carries_is_called_in_it(filename):
    """A module carries (or imports) only what it calls: each private helper is read by the rest of the module."""
    tree = ast.parse((GENERATED / filename).read_text(encoding="utf-8"))
    matching = [b for b in BACKENDS if filename.endswith(BACKENDS[b].suffix + ".py")]
    backend = max(matching, key=lambda b: len(BACKENDS[b].suffix))  # numpy's suffix "" matches every file
    definitions = helpers(backend).definitions
    named = top_level(tree)
    carried = [name for name in named if name in definitions and name.startswith("_")]
    assert carried, filename
    reads = [(node, read_names(node)) for node in tree.body]  # each top-level node walked once
    for name in carried:
        assert any(name in read for node, read in reads if node is not named[name]), (
            f"{filename} carries {name} but never calls it"
        )
