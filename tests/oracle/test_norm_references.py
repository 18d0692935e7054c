"""Issue 28: normalised cells written in the model language as their sources write them equal torch modules written
from the same sources (tests/support/norm_references.py, plain torch and autograd, nothing shared with bptt), in
float64 to 1e-12 with the weights copied: the outputs, the loss and every gradient, for the generated module of
every backend.

- the zoo's lstm-layernorm (generated/lstm_layernorm*.py) against Ba et al.'s equations 20-22 as a torch.nn.Module;
- examples/layer_norm_cells.py: an Elman cell with torch.nn.LayerNorm, PyTorch's benchmark LayerNormLSTMCell and a
  GRU with torch.nn.RMSNorm, each against its torch module."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import importlib
import pathlib

import numpy as np

from bptt.app.verify.check import load_module
from bptt.app.verify.problem import problem
from bptt.codegen.backends import BACKENDS
from bptt.derive.models import ZOO, load
from bptt.tests.support import norm_references

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "layer_norm_cells.py"
CELLS = {
    "lstm-layernorm": "BaLayerNormLSTM",
    f"{EXAMPLES}:elman_layernorm": "ElmanLayerNorm",
    f"{EXAMPLES}:lstm_layernorm_benchmark": "BenchmarkLayerNormLSTM",
    f"{EXAMPLES}:gru_rmsnorm": "RMSNormGRU",
}
SIZES = {"d": 2, "h": 3, "q": 4}


def _arrays(backend, arrays):
    """NumPy arrays as the backend's (float64 JAX)."""
    if backend == "torch":
        import torch

        return {key: torch.from_numpy(value) for key, value in arrays.items()}
    if backend == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        return {key: jax.numpy.asarray(value) for key, value in arrays.items()}
    return arrays


def close(got, expected, what):
    got = np.asarray(got)
    assert got.shape == expected.shape, what
    assert np.abs(got - expected).max() <= 1e-12 * max(1.0, np.abs(expected).max()), what


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("spec", CELLS, ids=lambda spec: spec.rpartition(":")[2])
def test_a_normalised_cell_equals_its_torch_module(spec, backend):
    model = load(spec)
    module = load_module(model, from_zoo=spec in ZOO, backend=backend)
    reference = getattr(norm_references, CELLS[spec])
    assert set(module.PARAMS) == {*reference.NAMES, "V"}
    instance = problem(load_module(model, from_zoo=spec in ZOO), steps=5, batch=3, seed=28, sizes=SIZES)
    outputs, loss, grads = norm_references.run(reference, instance.params, instance.xs, instance.ys, instance.initial)
    params, initial = _arrays(backend, instance.params), _arrays(backend, instance.initial)
    data = _arrays(backend, {"xs": instance.xs, "ys": instance.ys})
    got_outputs = module.forward(params, data["xs"], **initial)[0]
    got_loss, got = module.loss_and_grads(params, data["xs"], data["ys"], **initial)
    close(got_outputs, outputs, f"{backend} outputs")
    close(float(got_loss), np.asarray(loss), f"{backend} loss")
    assert set(got) == set(grads)
    for key, expected in grads.items():
        close(got[key], expected, f"{backend} dL/d{key}")


def test_the_references_are_what_their_sources_say():
    """Plain checks of the references themselves, by torch's own modules: Ba et al.'s LN with no epsilon is
    torch.nn.LayerNorm with eps=0; the benchmark's state is its normalised cell (zero mean over the units)."""
    import torch

    torch.manual_seed(0)
    z = torch.randn(3, 8, dtype=torch.float64)
    paper = norm_references.PaperLayerNorm(8, eps=0.0).double()
    torch_norm = torch.nn.LayerNorm(8, eps=0.0).double()
    with torch.no_grad():
        for ours, theirs in ((paper.alpha, torch_norm.weight), (paper.beta, torch_norm.bias)):
            ours.copy_(torch.randn(8, dtype=torch.float64))
            theirs.copy_(ours)
    assert torch.allclose(paper(z), torch_norm(z), rtol=1e-13, atol=1e-13)
    cell = norm_references.BenchmarkLayerNormLSTM(2, 3).double()
    state = (torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64))
    _, c = cell(torch.randn(4, 2, dtype=torch.float64), state)
    assert torch.allclose(c.mean(-1), torch.zeros(4, dtype=torch.float64), atol=1e-13)  # gain 1, bias 0 at init
    assert importlib.import_module("bptt.generated.lstm_layernorm").PARAMS[0] == "W_h"
