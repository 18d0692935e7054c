"""Helpers shared by the tests of the generated modules."""

import importlib

import pytest


def module_of(name):
    """generated/<name>.py; a zoo model that has none fails the test that asks for it."""
    try:
        return importlib.import_module("bptt.generated." + name.replace("-", "_"))
    except ModuleNotFoundError as error:
        pytest.fail(f"zoo model {name!r} has no generated module ({error}); run `bptt codegen {name}`")


def forward(module, params, xs, ys, **initial):
    """module.forward; a model trained with teacher forcing also reads the targets ys."""
    if module.TEACHER_FORCED:
        return module.forward(params, xs, ys, **initial)
    return module.forward(params, xs, **initial)
