"""BPTT in bounded memory in the torch modules: loss_and_grads(checkpoints=) equals full BPTT's for the cases
the NumPy modules are proven in (tests/generated/test_checkpoints.py), Model(checkpoints=) trains through
CheckpointedBPTT with full BPTT's gradients, and bad budgets are one-line errors."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import torch

from bptt.tests.support.checkpoints import (
    BAD,
    SIZES,
    TRUNCATIONS,
    assert_equal_gradients,
    assert_same_loss,
    budgets,
    cases,
    problem,
    torch_run,
)
from bptt.tests.support.modules import module_of
from bptt.tests.support.zoo import supporting


@pytest.mark.parametrize(("name", "mode"), cases(supporting("checkpoints")))
def test_loss_and_grads_equal_full_bptt(name, mode):
    module, truncate = module_of(f"{name}_torch"), TRUNCATIONS[mode]
    values = problem(module_of(name))
    loss, expected = torch_run(module, values, truncate, None)
    for budget in budgets(module, truncate):
        other, got = torch_run(module, values, truncate, budget)
        assert_same_loss(loss, other)
        assert_equal_gradients(expected, got, 1e-14)


@pytest.mark.parametrize("mode", ["full", "window", "random"])
@pytest.mark.parametrize("name", ["lstm", "elman-jordan"])
def test_model_with_checkpoints(name, mode):
    """Model(..., checkpoints=3): loss.backward() through CheckpointedBPTT gives BPTT's gradients."""
    module = module_of(f"{name}_torch")
    sizes = dict(zip(module.SIZES, SIZES, strict=True))
    _, xs, ys, _ = problem(module_of(name))
    xs, ys = torch.from_numpy(xs), torch.from_numpy(ys)
    grads = []
    for checkpoints in (None, 3):
        model = module.Model(
            **sizes,
            truncate=TRUNCATIONS[mode],
            rng=torch.Generator().manual_seed(5),
            init_rng=torch.Generator().manual_seed(1),
            checkpoints=checkpoints,
        )
        outputs = model(xs, ys) if module.TEACHER_FORCED else model(xs)
        model.loss(outputs, ys).backward()
        grads.append({name: getattr(model, name).grad.numpy() for name in module.PARAMS})
    assert_equal_gradients(grads[0], grads[1], 1e-14)


@pytest.mark.parametrize("bad", BAD)
def test_bad_budgets_are_one_line_errors(bad):
    module = module_of("lstm_torch")
    params, xs, ys, _ = problem(module_of("lstm"))
    tensors = {k: torch.from_numpy(v) for k, v in params.items()}
    calls = [lambda: module.loss_and_grads(tensors, torch.from_numpy(xs), torch.from_numpy(ys), checkpoints=bad)]
    if not isinstance(bad, str):  # a byte budget is checked per call, against the sizes of the call
        calls.append(lambda: module.Model(2, 3, 4, checkpoints=bad))
    for call in calls:
        with pytest.raises(ValueError, match="checkpoints") as error:
            call()
        assert "\n" not in str(error.value)
