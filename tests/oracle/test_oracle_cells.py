"""Users' cells (tests/support/user_cells.py), as users write them, through codegen and every backend, against
the oracle: outputs, loss and every gradient to 1e-12, full BPTT and truncated.

Each cell's module is generated as `bptt codegen FILE:FUNC --backend all --out DIR` would (the model
loaded by its file spec, each backend's module source written to a folder) and imported from there,
once per backend. The data come from the model's description (test_oracle.random_problem).
Generating a two-layer LSTM's modules takes 3-5 s (its forward-mode code most of it), so each cell
is one test that is marked slow (handed out first), and says
which backends and truncations fail. The oracle itself is checked on the cells that no backend
can check: against finite differences, and the unnamed GRU against the zoo GRU's modules."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import contextlib
import functools
import importlib.util
import os
import pathlib
import tempfile

import numpy as np
from test_oracle import central_differences, random_problem

from bptt.codegen.backends import BACKENDS, module_filename
from bptt.derive.models import load
from bptt.tests.support.jax_eager import eagerly
from bptt.tests.support.oracle import compare, run

CELLS_FILE = pathlib.Path(__file__).parents[1] / "support" / "user_cells.py"
CELLS = ["lstm2_stacked", "lstm2_gates", "gru_unnamed", "mgu", "gru_cho", "plus_one", "elman2_chains"]
TRUNCATIONS = {"full": None, "window2": ("window", 2), "chunk2": ("chunk", 2)}
XDIST_GROUP = "zoo modules at T=5, B=3"  # with test_oracle.py: the zoo GRU's JAX module compiled once for both

_FOLDER = tempfile.TemporaryDirectory(prefix="bptt-user-cells-")  # removed when the session's process ends


def generate(model, backend):
    """The model's module for the backend, written to a folder (one per process) and imported from it."""
    folder = pathlib.Path(_FOLDER.name) / str(os.getpid())
    folder.mkdir(exist_ok=True)
    path = folder / module_filename(model, backend)
    path.write_text(BACKENDS[backend].module_source(model), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"user_cell_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def agree_in_every_truncation(model, backend, seed=28, expected=None):
    """The backend's module of the model against the oracle in full BPTT (and forward mode) and in TRUNCATIONS;
    expected: oracle_results(model, seed), when the caller has them already (several backends, one oracle)."""
    problem = random_problem(model, seed=seed)
    expected = expected or oracle_results(model, seed)
    module = generate(model, backend)
    with eagerly(module) if backend == "jax" else contextlib.nullcontext():  # JAX uncompiled: seconds, not a minute
        for mode, truncate in TRUNCATIONS.items():
            compare(module, model, *problem, truncate, forward_mode=truncate is None, expected=expected[mode])


def oracle_results(model, seed=28):
    """The oracle's results (run) for the model's random problem of this seed, by TRUNCATIONS' names."""
    problem = random_problem(model, seed=seed)
    return {mode: run(model, *problem, truncate) for mode, truncate in TRUNCATIONS.items()}


@functools.cache
def oracle_of_cell(spec):
    """oracle_results of the model loaded from spec (file.py:function), once per process: the same numbers for
    each backend's module of the cell."""
    return oracle_results(load(spec))


def backend_failures(model, problem, checks=()):
    """Every backend's module against the oracle in each truncation, then each of checks(module, model, *problem)
    (a list of failure lines): the failures, each naming its backend. The oracle runs once per truncation (the
    same numbers for every backend)."""
    failures, expected = [], {}
    for mode, truncate in TRUNCATIONS.items():
        try:
            expected[mode] = run(model, *problem, truncate)
        except Exception as error:
            failures.append(f"oracle {mode}: {type(error).__name__}: {error}")
    for backend in BACKENDS:
        try:
            module = generate(model, backend)
        except Exception as error:
            failures.append(f"{backend}: codegen failed: {type(error).__name__}: {error}")
            continue
        for mode, truncate in TRUNCATIONS.items():
            try:
                compare(module, model, *problem, truncate=truncate, expected=expected.get(mode))
            except Exception as error:
                failures.append(f"{backend} {mode}: {type(error).__name__}: {error}")
        for check in checks:
            try:
                failures += [f"{backend}: {failure}" for failure in check(module, model, *problem)]
            except Exception as error:
                failures.append(f"{backend} {check.__name__}: {type(error).__name__}: {error}")
    return failures


@pytest.mark.slow
@pytest.mark.parametrize("cell", CELLS)
def test_user_cell_agrees_with_the_oracle(cell):
    """Every backend x {full, window 2, chunk 2}; the message lists each that fails, with its error."""
    model = load(f"{CELLS_FILE}:{cell}")
    problem = random_problem(model, seed=len(model.name))
    failures = backend_failures(model, problem)
    checks = len(BACKENDS) * len(TRUNCATIONS)
    if failures:
        raise AssertionError(f"{cell}: {len(failures)} of {checks} checks fail:\n" + "\n".join(failures))


@pytest.mark.parametrize("truncate", TRUNCATIONS.values(), ids=TRUNCATIONS)
def test_the_unnamed_gru_is_the_zoo_gru(truncate):
    """gru_unnamed is torch.nn.GRU without named pre-activations: the oracle of it agrees with the zoo
    GRU's modules (same parameters), a check of the oracle on that cell while its codegen fails."""
    model = load(f"{CELLS_FILE}:gru_unnamed")
    problem = random_problem(model, seed=6)
    for suffix in ("", "_torch", "_jax"):
        compare(importlib.import_module(f"bptt.generated.gru{suffix}"), model, *problem, truncate=truncate)


@pytest.mark.parametrize("cell", ["mgu", "gru_cho"])
def test_oracle_of_a_cell_matches_finite_differences(cell):
    model = load(f"{CELLS_FILE}:{cell}")
    problem = random_problem(model, seed=2)
    grads, numeric = run(model, *problem).grads, central_differences(model, *problem)
    for key, value in numeric.items():
        error = np.abs(grads[key] - value).max() / np.abs(value).max()
        assert error < 1e-7, f"{cell}: {key}: oracle {grads[key]}, finite differences {value}"
