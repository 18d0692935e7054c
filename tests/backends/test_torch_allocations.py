"""The torch modules' loops allocate nothing per step: measured with torch's profiler, loss_and_grads makes
as many allocations over 6 steps as over 3, in full BPTT and in random truncation (the forward loop and
the backward loop of the full pass), for the zoo and the normalised cells (tests/support/norm_cells.py: a norm's
parts and adjoint, mean and sum written out, of parameters too, slices of a normalised vector). The window pass (an
age axis) allocates as it goes and is not tested."""

import importlib
import importlib.util

import pytest

torch = pytest.importorskip("torch", reason="the torch backend's tests need torch")

from torch.profiler import ProfilerActivity, profile

from bptt.codegen.backends import BACKENDS
from bptt.tests.support import norm_cells
from bptt.tests.support.zoo import supporting

SIZES = {"d": 2, "h": 3, "q": 4}


def allocations(run):
    """How many times the allocator gave memory while run() ran (its kineto memory events of positive size)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        run()
    events = profiler.profiler.kineto_results.events()
    return sum(1 for event in events if event.name() == "[memory]" and event.nbytes() > 0)


def counted(module, T, truncate):
    generator = torch.Generator().manual_seed(0)
    params = module.init_params(generator, torch.float64, **SIZES)
    xs, ys = module.random_inputs(generator, T, 2, torch.float64, **SIZES)
    options = {} if truncate is None else {"truncate": truncate, "rng": torch.Generator().manual_seed(1)}
    return allocations(lambda: module.loss_and_grads(params, xs, ys, **options))


@pytest.mark.parametrize("truncate", [None, ("random", 0.5)], ids=["full", "random"])
@pytest.mark.parametrize("name", supporting("truncate"))
def test_no_step_allocates(name, truncate):
    module = importlib.import_module(f"bptt.generated.{BACKENDS['torch'].filename(name)[:-3]}")
    short, long = counted(module, 3, truncate), counted(module, 6, truncate)
    assert short == long, f"{name}: {short} allocations over 3 steps, {long} over 6"


@pytest.mark.parametrize(
    "cell",
    ["layer_norm_elman", "rms_gru", "reduced", "lstm_sliced_norm", "lstm_gate_norms", "norm_in_gain", "reduced_params"],
)
def test_no_step_of_a_normalised_cell_allocates(cell, tmp_path):
    path = tmp_path / f"{cell}_torch.py"
    path.write_text(BACKENDS["torch"].module_source(getattr(norm_cells, cell)()), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"normalised_{cell}_torch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for truncate in (None, ("random", 0.5)):
        short, long = counted(module, 3, truncate), counted(module, 6, truncate)
        assert short == long, f"{cell} {truncate}: {short} allocations over 3 steps, {long} over 6"


def test_the_count_sees_a_product_made_at_every_step():
    """The measure itself: a loop that makes a product at every step allocates once more per step."""
    a, w = torch.ones(7, 2, 3, dtype=torch.float64), torch.ones(3, 3, dtype=torch.float64)

    def loop(T):
        for t in range(T):
            a[t] @ w

    assert allocations(lambda: loop(6)) - allocations(lambda: loop(3)) == 3
