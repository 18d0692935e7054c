"""The module templates only lay out: every decision about a model (its roles, teacher forcing, the mean,
the labels) is taken in Python (printing/facts.py, printing/work.py, each backend's render.py), and the
templates place what was decided. Each backend lays out its own Layout type, one Facts field in it."""

import dataclasses
import importlib
import pathlib
import re

import pytest

from bptt.codegen.backends import BACKENDS
from bptt.codegen.printing.facts import Facts
from bptt.codegen.printing.layout import Layout
from bptt.derive.models import load

CODEGEN = pathlib.Path(__file__).resolve().parents[2] / "codegen"
TEMPLATES = sorted(CODEGEN.glob("*/module*.py.j2"))
DECISIONS = {
    "a conditional tag": re.compile(r"{%-?\s*(if|elif)\b"),
    "a conditional expression": re.compile(r"{{[^}]*\bif\b[^}]*}}"),
    "the model itself": re.compile(r"\bm\.model\b"),
    "a role": re.compile(r"\brole\b"),
}


def test_every_backend_and_the_shared_head_have_a_template():
    names = {path.relative_to(CODEGEN).as_posix() for path in TEMPLATES}
    assert {f"{backend}/module.py.j2" for backend in BACKENDS} | {"printing/module_head.py.j2"} <= names


@pytest.mark.parametrize("path", TEMPLATES, ids=[path.relative_to(CODEGEN).as_posix() for path in TEMPLATES])
def test_a_template_takes_no_decision(path):
    text = path.read_text(encoding="utf-8")
    found = [f"{what}: {match.group(0)!r}" for what, pattern in DECISIONS.items() for match in pattern.finditer(text)]
    assert not found, found


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_each_backend_has_a_layout_of_its_own_with_the_facts_in_one_field(backend):
    render = importlib.import_module(BACKENDS[backend].renderer)
    laid = render.layout(load("jordan"))  # teacher forcing, labels
    assert isinstance(laid, Layout) and type(laid) is not Layout and dataclasses.is_dataclass(laid)
    assert isinstance(laid.facts, Facts) and laid.facts.forced_ys == ", ys"
    fields = {field.name: getattr(laid, field.name) for field in dataclasses.fields(laid)}
    assert not [name for name, value in fields.items() if isinstance(value, dict)], "a layout holds no dicts"
    assert not [name for name, value in fields.items() if value in ((), "")], "a layout holds no empty dummy field"
