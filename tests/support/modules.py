"""Helpers shared by the tests of the generated modules."""

import dataclasses
import importlib
import sys

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


def cache_steps(cache, module, reference):
    """reference's cache (a dict of arrays, as its module `reference` makes it) with the steps module's CACHE
    says its cache holds: steps 1..T of an array where module holds only those (a JAX module's values that hold
    no state: what its scan stacks) and reference steps 0..T."""
    return {
        name: value[1:] if reference.CACHE[name][0] == "T+1" and module.CACHE[name][0] == "T" else value
        for name, value in cache.items()
    }


def runtime_of(module, anchor="_check_params"):
    """Where the part of a generated module's runtime lives that defines the function `anchor` its passes import:
    bptt.runtime.<backend> or its sibling (torch's checks: bptt.runtime.torch_checks; torch's compile glue and
    loss parts, anchor "_check_compile": bptt.runtime.torch), the module itself if it was generated with
    --standalone; a module of sweeps' is its model's."""
    defined = getattr(sys.modules[type(passes_of(module)).__module__], anchor)
    return sys.modules[defined.__module__]


def passes_of(module):
    """The _Passes a module's runtime checks its arguments with (a module of sweeps': its model's)."""
    return module._SWEEPS.model_passes() if hasattr(module, "_SWEEPS") else segments_of(module)


def segments_of(module):
    """What a module hands its runtime and the checkpoint driver (runtime/checkpoints.py): its _Passes."""
    return module._PASSES


def groups_of(module, sizes):
    """(_Passes, their sizes) of each group of steps a module runs: its own for a forward-only model; a model with
    reverse-time states' groups (runtime/sweeps.py), each sized as the runtime sizes it (its input's rows too)."""
    if not hasattr(module, "_SWEEPS"):
        return [(segments_of(module), sizes)]
    from bptt.runtime.sweep_checkpoints import _group_sizes

    sweeps = module._SWEEPS
    return [(sweep.passes, own) for sweep, own in zip(sweeps.sweeps, _group_sizes(sweeps, sizes), strict=True)]


def count_forward_steps(monkeypatch, module):
    """The steps each run of the module's forward pass takes, appended to the list returned as they run: its
    _forward counts, and so does the one its _PASSES hands the runtime."""
    counted, forward = [], module._forward

    def counting(params, sizes, x, *rest):
        counted.append(len(x))
        return forward(params, sizes, x, *rest)

    monkeypatch.setattr(module, "_forward", counting)
    if hasattr(module, "_PASSES"):
        monkeypatch.setattr(module, "_PASSES", dataclasses.replace(module._PASSES, forward=counting))
    return counted
