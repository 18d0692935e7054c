"""Random cells of the trust issue (tests/cells.py) in bounded memory: for each drawn cell, the NumPy
and torch modules' loss_and_grads with checkpoints equal full BPTT's to 1e-14, in full BPTT and a drawn
truncation; a cell the tool refuses for a documented reason is skipped as test_random_cells.py skips it."""

import tempfile

import numpy as np
import pytest
import torch
from cell_plans import build, random_values
from cells import plans, truncations
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_checkpoints import assert_equal_gradients
from test_random_cells import DETERMINISTIC, REFUSALS, import_file

from bptt.codegen.backends import BACKENDS
from bptt.derive.bptt import derive

STEPS, BATCH = 11, 2


def generate(model, folder):
    """The NumPy and torch modules of a model, written into folder and imported from there."""
    modules = {}
    for name in ("numpy", "torch"):
        backend = BACKENDS[name]
        path = f"{folder}/{backend.filename(model.name)}"
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(backend.module_source(model))
        modules[name] = import_file(path, f"checkpoint_cell_{id(folder)}_{name}")
    return modules


def run(backend, module, values, truncate, checkpoints):
    params, xs, ys, initial = values
    if backend == "torch":
        params = {k: torch.from_numpy(v) for k, v in params.items()}
        initial = {f"{k}0": torch.from_numpy(v) for k, v in initial.items()}
        xs, ys = torch.from_numpy(xs), torch.from_numpy(ys)
    else:
        initial = {f"{k}0": v for k, v in initial.items()}
    loss, grads = module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, checkpoints=checkpoints)
    return float(loss), {k: np.asarray(v) for k, v in grads.items()}


@pytest.mark.slow
@settings(max_examples=6, phases=(Phase.explicit, Phase.generate), suppress_health_check=[HealthCheck.too_slow], **DETERMINISTIC)
@given(data=st.data())
def test_random_cells_in_bounded_memory(data):
    plan = data.draw(plans(), label="plan")
    truncate = data.draw(truncations(STEPS), label="truncate")
    try:
        model = build(plan)
        derive(model, named="textbook")
        with tempfile.TemporaryDirectory() as folder:
            modules = generate(model, folder)
    except REFUSALS:
        return  # test_random_cells.py checks that the refusal is a documented one
    values = random_values(model, STEPS, BATCH, data.draw(st.integers(0, 2**16), label="seed"))
    for backend, module in modules.items():
        for mode in (None, truncate):
            loss, expected = run(backend, module, values, mode, None)
            for budget in (2, 4):
                other, got = run(backend, module, values, mode, budget)
                assert abs(other - loss) <= 1e-14 * max(abs(loss), 1e-300), (backend, mode, budget)
                assert_equal_gradients(expected, got, 1e-14, ())
