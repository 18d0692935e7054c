"""Issue 28: minLSTM (Feng et al. 2024, its gates normalised by an elementwise power (f_t + i_t)^(-1)) and
AntisymmetricRNN (Chang et al. 2019, W - W^T - gamma I) from examples/, generated in every backend, against a
torch forward written here from the papers' equations (nothing of bptt): its loss and torch.autograd's gradients
equal every backend's loss_and_grads and forward_mode_grads, in float64 to 1e-12."""

import pathlib

import numpy as np
import pytest
import torch

from bptt.app.verify.check import load_module
from bptt.derive.models import load

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
SIZES, T, B = {"d": 2, "h": 3, "q": 4}, 5, 3
BACKENDS = ("numpy", "torch", "jax")


def min_lstm_forward(p, xs, h0):
    """Feng et al.'s minLSTM, sequential mode: f'_t = f_t / (f_t + i_t), i'_t = i_t / (f_t + i_t),
    h_t = f'_t * h_{t-1} + i'_t * h~_t, h~_t = Linear_h(x_t); the head V h_t."""
    h, outputs = h0, []
    for x in xs:
        f = torch.sigmoid(x @ p["W_f"].T + p["b_f"])
        i = torch.sigmoid(x @ p["W_i"].T + p["b_i"])
        candidate = x @ p["W_h"].T + p["b_h"]
        h = f / (f + i) * h + i / (f + i) * candidate
        outputs.append(h @ p["V"].T)
    return torch.stack(outputs)


def antisymmetric_forward(p, xs, h0, eps=0.1, gamma=0.01):
    """Chang et al.'s equation 12: h_t = h_{t-1} + eps tanh((W - W^T - gamma I) h_{t-1} + V x_t + b); head C h_t."""
    h, outputs = h0, []
    M = p["W"] - p["W"].T - gamma * torch.eye(p["W"].shape[0], dtype=torch.float64)
    for x in xs:
        h = h + eps * torch.tanh(h @ M.T + x @ p["V"].T + p["b"])
        outputs.append(h @ p["C"].T)
    return torch.stack(outputs)


CELLS = {
    "min_lstm": (f"{EXAMPLES / 'min_lstm.py'}:min_lstm", min_lstm_forward),
    "antisymmetric_rnn": (f"{EXAMPLES / 'antisymmetric_rnn.py'}:antisymmetric_rnn", antisymmetric_forward),
}


def values(module, seed):
    rng = np.random.default_rng(seed)
    params = module.init_params(rng, **SIZES)
    xs, ys = module.random_inputs(rng, T, B, **SIZES)
    return params, xs, ys, rng.standard_normal((B, SIZES["h"]))


def paper(forward, params, xs, ys, h0):
    """The loss sum_t 1/2 ||s_t - y_t||^2, averaged over the batch, and its gradients by torch.autograd."""
    leaves = {k: torch.tensor(v, requires_grad=True) for k, v in {**params, "h0": h0}.items()}
    outputs = forward(leaves, torch.tensor(xs), leaves["h0"])
    loss = 0.5 * ((outputs - torch.tensor(ys)) ** 2).sum() / B
    grads = torch.autograd.grad(loss, list(leaves.values()))
    return float(loss.detach()), {k: g.numpy() for k, g in zip(leaves, grads, strict=True)}


def framework(backend):
    """(to the backend's arrays, back to NumPy)."""
    if backend == "torch":
        return torch.from_numpy, lambda a: a.numpy()
    if backend == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        return jax.numpy.asarray, np.asarray
    return (lambda a: a), np.asarray


def assert_close(got, want, what):
    assert np.abs(np.asarray(got) - want).max() <= 1e-12 * max(np.abs(want).max(), 1e-300), what


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_every_backend_agrees_with_the_papers_torch_forward(cell, backend):
    spec, forward = CELLS[cell]
    module = load_module(load(spec), from_zoo=False, backend=backend)
    params, xs, ys, h0 = values(load_module(load(spec), from_zoo=False), seed=11)
    want_loss, want = paper(forward, params, xs, ys, h0)
    to, back = framework(backend)
    arrays = ({k: to(v) for k, v in params.items()}, to(xs), to(ys))
    loss, grads = module.loss_and_grads(*arrays, h0=to(h0))
    assert abs(float(loss) - want_loss) <= 1e-12 * abs(want_loss)
    assert set(grads) == set(want)
    for key, grad in grads.items():
        assert_close(back(grad), want[key], (backend, key))
    _, forward_grads = module.forward_mode_grads(*arrays, h0=to(h0))  # W^T's directions: each runtime's own
    for key, grad in forward_grads.items():
        assert_close(back(grad), want[key], (backend, "forward mode", key))
