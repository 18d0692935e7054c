"""A generated NumPy or torch module carries its model's maths and no runtime (issue 26, Required 2): it
defines the public shells, each one call of the runtime it hands its maths to, and the maths, as the
runtime's lists name them (runtime/numpy_passes.py's and torch_passes.py's); torch's autograd glue is one
call of the runtime's; its size is within the issue's targets, counted from the files."""

import ast
import pathlib

import pytest

from bptt.runtime import numpy_passes, torch_passes

GENERATED = pathlib.Path(__file__).parents[2] / "generated"
ZOO = sorted(path for path in GENERATED.glob("*.py") if path.stem != "__init__")
NUMPY = [path for path in ZOO if not path.stem.endswith(("_torch", "_jax"))]
TORCH = [path for path in ZOO if path.stem.endswith("_torch")]
OWN = {  # backend -> (the runtime's list of what a module defines, its shells)
    "numpy": (numpy_passes.MODULE_FUNCTIONS, numpy_passes.SHELLS),
    "torch": (torch_passes.SHELLS + torch_passes.MATHS, torch_passes.SHELLS),
}


def lines(path):
    return len(path.read_text(encoding="utf-8").splitlines())


def test_linear_is_at_most_250_lines_and_no_zoo_module_is_over_600():
    assert lines(GENERATED / "linear.py") <= 250
    assert len(NUMPY) == 9 and len(TORCH) == 9 and len(ZOO) == 27
    assert {path.name: lines(path) for path in ZOO if lines(path) > 600} == {}


@pytest.mark.parametrize("path", NUMPY + TORCH, ids=[path.stem for path in NUMPY + TORCH])
def test_a_module_defines_its_shells_glue_and_maths_only(path):
    own, shells = OWN["torch" if path.stem.endswith("_torch") else "numpy"]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert set(defined) <= set(own) and set(own) - set(defined) <= {"_forward_step", "_adjoints_step"}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in shells and node.name != "forward_mode_grads":
            body = node.body[1:]  # after the docstring: one call of the runtime (losses: then the loss's maths)
            assert len(body) == (2 if node.name == "losses" else 1), node.name
            assert isinstance(body[0], (ast.Return, ast.Assign)) and isinstance(body[0].value, ast.Call), node.name
    glue = [node for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)]
    if path.stem.endswith("_torch"):  # the autograd glue: the runtime's classes, made for this module in one call
        assert [[name.id for name in node.targets[0].elts] for node in glue] == [list(torch_passes.GLUE)]
        assert ast.unparse(glue[0].value) == "_autograd(_PASSES, __name__)"
