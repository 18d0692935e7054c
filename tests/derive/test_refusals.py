"""Every refusal in derive/ and codegen/ is triggered by a small cell and says what is wrong in the user's notation:
one line naming the model (and the backend, when one is generating), never an internal node's class.

The raise sites are found with ast over the source; tests/support/refusal_cells.py's CELLS gives a cell for each,
INTERNAL the few a model cannot reach, with a word of why. The checks of a generated module's call arguments
live in runtime/, outside these folders (their messages have tests of their own). A new `raise` without an
entry fails test_every_raise_has_a_cell."""

import ast
import functools
import pathlib
import re
from collections import Counter
from dataclasses import dataclass, replace

import pytest
import sympy as sp

from bptt.codegen.backends import BACKENDS
from bptt.derive.bptt import derive
from bptt.derive.models import load
from bptt.documents.document import sections
from bptt.tests.support.refusal_cells import CELLS, INTERNAL, with_function

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = ("derive", "codegen")


@dataclass(frozen=True)
class Site:
    path: str
    scope: str
    error: str
    words: str  # the first literal words of the message, its placeholders left out
    lines: range
    key: str = ""  # path, scope and words: what the tables below know it by (" #2" for a second alike)


@functools.cache
def _trees():
    """{path: its ast} of the sources of derive/ and codegen/, parsed once (when a test first asks, not while
    pytest collects in each worker)."""
    paths = [path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
    return {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(encoding="utf-8")) for path in paths}


def raise_sites():
    """Every `raise X(...)` of derive/ and codegen/, by ast."""
    seen = Counter()
    for relative, tree in _trees().items():
        for site in _sites(relative, tree, []):
            key = f"{site.path} {site.scope}: {site.words}".rstrip()
            seen[key] += 1
            yield replace(site, key=key if seen[key] == 1 else f"{key} #{seen[key]}")


def _sites(path, node, scope):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
            yield from _sites(path, child, [*scope, child.name])
            continue
        if isinstance(child, ast.Raise) and child.exc is not None:
            call = child.exc if isinstance(child.exc, ast.Call) else None
            error = ast.unparse(call.func if call else child.exc)
            words = " ".join(_literal(call.args[0]).split()[:10]) if call and call.args else ""
            yield Site(path, ".".join(scope), error, words, range(child.lineno, child.end_lineno + 1))
        yield from _sites(path, child, scope)


def _literal(node):
    """The constant text of a message: a string, an f-string's literal parts, a concatenation's."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal(part) for part in node.values)
    return ""


def _class_names():
    """The classes of derive/ and codegen/ (the model API's own names aside: a user writes those), and SymPy's."""
    found = {n.name for tree in _trees().values() for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    sympy_names = {
        name for name in dir(sp) if isinstance(getattr(sp, name), type) and issubclass(getattr(sp, name), sp.Basic)
    }
    public = {"Model", "Seq", "Elementwise", "GenericLoss", "SquaredError", "SoftmaxCrossEntropy", "OneHot"}
    classes = found | sympy_names | {"Tangent", "Diag", "Apply", "SeqAt", "Adj", "OneMatrix", "Str"}
    return {name for name in classes if name[0].isupper()} - public  # tanh, exp: a function's name is notation


@functools.cache
def internal_names():
    """A pattern of _class_names, the longest first."""
    return re.compile(r"\b(" + "|".join(sorted(map(re.escape, _class_names()), key=len, reverse=True)) + r")\b")


def test_every_raise_has_a_cell():
    """The table covers every raise site found, and names none that is gone."""
    keys = set(sites())
    covered = set(CELLS) | set(INTERNAL)
    assert sorted(keys - covered) == [], "raise sites with no cell: add one to CELLS (or INTERNAL, with why)"
    assert sorted(covered - keys) == [], "entries for raise sites that are gone"
    assert not set(CELLS) & set(INTERNAL)


def trigger(how, make, tmp_path, monkeypatch):
    """Run a cell as `how` says; the exception it raises."""
    if make is with_function:
        make = functools.partial(make, monkeypatch)
    with pytest.raises(Exception) as caught:
        if how == "load":
            load(make(tmp_path))
        elif how == "build":
            make()
        elif how == "derive":
            derive(make())
        elif how == "latex":
            sections(make())
        else:
            BACKENDS[how].module_source(make())
    return caught.value


def raised_at(error):
    """(path, line) where each exception of error's chain (causes and contexts) was raised."""
    found = set()
    while error is not None:
        tb = error.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            found.add((pathlib.Path(tb.tb_frame.f_code.co_filename).resolve(), tb.tb_lineno))
        error = error.__cause__ or error.__context__
    return found


@functools.cache
def sites():
    """{key: Site} of every raise site."""
    return {site.key: site for site in raise_sites()}


@pytest.mark.parametrize("key", sorted(CELLS))
def test_each_refusal_is_one_line_in_the_users_notation(key, tmp_path, monkeypatch):
    how, make = CELLS[key]
    error = trigger(how, make, tmp_path, monkeypatch)
    site = sites()[key]
    places = raised_at(error)
    assert any(path == (ROOT / site.path).resolve() and line in site.lines for path, line in places), (
        f"the cell raised elsewhere: {type(error).__name__}: {error}"
    )
    message = str(error)
    assert isinstance(error, ValueError) and "\n" not in message, message
    assert not internal_names().search(message), f"an internal name in: {message}"
    if how == "load":
        assert "cells.py" in message or "missing.py" in message or "no-such-model" in message, message
    else:
        assert re.search(r"model 'tiny!?'", message), message
    if how in BACKENDS and error.__class__.__name__ != "ModelError":
        assert f"({BACKENDS[how].title} backend)" in message, message
