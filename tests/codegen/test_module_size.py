"""A generated NumPy module carries its model's maths and no runtime (issue 26, Required 2): its functions are
the public shells, each one call of the runtime it hands its maths to, and the maths the runtime's list
names (runtime/numpy_passes.py's MODULE_FUNCTIONS); its size is within the issue's targets, counted from
the files."""

import ast
import pathlib

import pytest

from bptt.runtime.numpy_passes import MODULE_FUNCTIONS, SHELLS

GENERATED = pathlib.Path(__file__).parents[2] / "generated"
NUMPY = sorted(
    path
    for path in GENERATED.glob("*.py")
    if path.stem != "__init__" and "_" + path.stem.rpartition("_")[2] not in ("_torch", "_jax")
)


def lines(path):
    return len(path.read_text(encoding="utf-8").splitlines())


def test_linear_is_at_most_250_lines_and_no_numpy_module_is_over_600():
    assert lines(GENERATED / "linear.py") <= 250
    assert NUMPY and {path.name: lines(path) for path in NUMPY if lines(path) > 600} == {}


@pytest.mark.parametrize("path", NUMPY, ids=[path.stem for path in NUMPY])
def test_a_numpy_module_defines_its_shells_and_maths_only(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert defined == list(MODULE_FUNCTIONS)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in SHELLS and node.name != "forward_mode_grads":
            body = node.body[1:]  # after the docstring: one call of the runtime (losses: then the loss's maths)
            assert len(body) == (2 if node.name == "losses" else 1), node.name
            assert isinstance(body[0], (ast.Return, ast.Assign)) and isinstance(body[0].value, ast.Call), node.name
    nested = [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    assert sorted(nested) == sorted(MODULE_FUNCTIONS), "a function defined inside another"
