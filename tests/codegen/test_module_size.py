"""A generated NumPy or torch module carries its model's maths and no runtime (issue 26, Required 2): it
defines the public shells, each one call of the runtime it hands its maths to, and the maths, as the
runtime's lists name them (runtime/numpy_passes.py's and torch_passes.py's); torch's autograd glue is one
call of the runtime's; its size is within the issue's targets, counted from the files."""

import ast
import pathlib
import re

import pytest

from bptt.runtime import numpy_passes, torch_passes
from bptt.tests.support.zoo import EVERY, WITH_REVERSE_STATES

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
    assert len(NUMPY) == len(TORCH) == len(EVERY) and len(ZOO) == 3 * len(EVERY)
    assert {path.name: lines(path) for path in ZOO if lines(path) > 600} == {}


def _forward_only(path):
    return path.stem.removesuffix("_torch").replace("_", "-") not in WITH_REVERSE_STATES


FORWARD_ONLY = [path for path in NUMPY + TORCH if _forward_only(path)]
SWEEPS = [path for path in NUMPY + TORCH if not _forward_only(path)]


@pytest.mark.parametrize("path", FORWARD_ONLY, ids=[path.stem for path in FORWARD_ONLY])
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


@pytest.mark.parametrize("path", SWEEPS, ids=[path.stem for path in SWEEPS])
def test_a_module_of_sweeps_defines_its_shells_and_each_groups_maths_only(path):
    """A model with reverse-time states: the public shells, each one call of the runtime's composition, and per group
    of steps (_sweep1_, _sweep2_, ...) the maths a forward-only module defines that the runtime runs: the last
    group's losses (the model's), no other group's, and no group's autograd glue (the model's Model is one)."""
    own, shells = OWN["torch" if path.stem.endswith("_torch") else "numpy"]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    groups = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            prefix, name = re.fullmatch(r"(_sweep\d+_)?(.*)", node.name).groups()
            groups.setdefault(prefix, set()).add(name)
    public = groups.pop(None)
    assert public == set(shells)
    assert len(groups) >= 2
    *others, last = [groups[prefix] for prefix in sorted(groups, key=lambda prefix: int(prefix[6:-1]))]
    for defined in groups.values():
        assert {"forward", "adjoints", "gradients"} <= defined <= {name.lstrip("_") for name in own}
    assert "losses" in last and not any("losses" in defined for defined in others)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in shells and node.name != "forward_mode_grads":
            body = node.body[1:]
            assert isinstance(body[-1], (ast.Return, ast.Assign)) and isinstance(body[-1].value, ast.Call), node.name
    glue = [node for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)]
    assert glue == []


SWEEPS_ALL = sorted(
    path
    for path in ZOO
    if path.stem.removesuffix("_torch").removesuffix("_jax") in {name.replace("-", "_") for name in WITH_REVERSE_STATES}
)


@pytest.mark.parametrize("path", SWEEPS_ALL, ids=[path.stem for path in SWEEPS_ALL])
def test_a_module_of_sweeps_carries_only_what_it_calls(path):
    """Every private name a module of sweeps binds at its top level is read in it (a group's losses but the last's,
    its JAX apply and forward mode, its torch autograd glue were printed and never called)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        for target in getattr(node, "targets", []):
            bound |= {name.id for name in ast.walk(target) if isinstance(name, ast.Name)}
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    assert sorted(name for name in bound - read if name.startswith("_")) == []
