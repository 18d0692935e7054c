"""GRU-D (Che et al. 2018) as examples/gru_d.py writes it: its derivation compiles, and its generated NumPy, torch
and JAX modules equal a forward written here in plain torch from the paper's equations (nothing of bptt, not the
model file): outputs, loss, and loss_and_grads' and forward_mode_grads' gradients against torch.autograd of that
forward, in float64 to 1e-12; padded batches too. The data are made as the paper's preprocessing makes them:
observation masks, time gaps since each variable's last observation, its last observed value."""

import pathlib

import numpy as np
import pytest
import torch

from bptt.app.verify.check import load_module
from bptt.derive.models import load
from bptt.documents.render import document
from bptt.tests.support.cli import assert_ok, bptt
from bptt.tests.support.printed import pdflatex

SPEC = f"{pathlib.Path(__file__).resolve().parents[2] / 'examples' / 'gru_d.py'}:gru_d"
SIZES, T, B = {"d": 3, "h": 4, "q": 2}, 6, 3
BACKENDS = ("numpy", "torch", "jax")
TOL = 1e-12


def paper_forward(p, x, m, delta, x_last, h0, bug=None):
    """Che et al.'s GRU-D, equations (5)-(9) and the GRU's, step by step; its head W_o h_t + b_o at every step.
    bug: a published implementation's mistake instead ("current x": the decay applied to x_t, not to the last
    observation, zhiyongc/GRU-D#3; "no mean": no decay towards the empirical mean, caow13/BRITS#8)."""
    h, outputs = h0, []
    for t in range(x.shape[0]):
        gamma_x = torch.exp(-torch.maximum(torch.zeros(()), delta[t] * p["w_gx"] + p["b_gx"]))  # W_gamma_x diagonal
        gamma_h = torch.exp(-torch.maximum(torch.zeros(()), delta[t] @ p["W_gh"].T + p["b_gh"]))
        last = x[t] if bug == "current x" else x_last[t]
        mean = 0 if bug == "no mean" else (1 - gamma_x) * p["x_mean"]
        x_hat = m[t] * x[t] + (1 - m[t]) * (gamma_x * last + mean)
        h = gamma_h * h
        r = torch.sigmoid(x_hat @ p["W_r"].T + h @ p["U_r"].T + m[t] @ p["V_r"].T + p["b_r"])
        z = torch.sigmoid(x_hat @ p["W_z"].T + h @ p["U_z"].T + m[t] @ p["V_z"].T + p["b_z"])
        h_tilde = torch.tanh(x_hat @ p["W"].T + (r * h) @ p["U"].T + m[t] @ p["V"].T + p["b"])
        h = (1 - z) * h + z * h_tilde
        outputs.append(h @ p["W_o"].T + p["b_o"])
    return torch.stack(outputs)


def preprocessed(rng, steps, batch, d):
    """(x, m, delta, x_last) as the paper's preprocessing gives them: a random mask (the first step's variables all
    observed), measurement times s_t, delta_t = s_t - s_{t-1} (+ delta_{t-1} if unobserved at t-1), delta_1 = 0,
    x_last the last observed value before t (x_t itself where observed, as the paper's x_{t'} then is)."""
    x = rng.standard_normal((steps, batch, d))
    m = (rng.random((steps, batch, d)) < 0.6).astype(float)
    m[0] = 1
    times = np.cumsum(rng.uniform(0.2, 2.0, (steps, batch, 1)), axis=0)
    delta, x_last = np.zeros_like(x), x.copy()
    for t in range(1, steps):
        gap = times[t] - times[t - 1]
        delta[t] = gap + np.where(m[t - 1] == 1, 0, delta[t - 1])
        x_last[t] = np.where(m[t - 1] == 1, x[t - 1], x_last[t - 1])
    return x, m, delta, x_last


def problem(seed, steps=T):
    """(params, u, ys, h0, the paper's inputs): the parameters in the maths' shapes, N(0, 0.6^2) (a decay's
    pre-activation of either sign: some entries of max(0, .) take 0); u = [x; m; delta; x_last], as the model
    reads it."""
    rng = np.random.default_rng(seed)
    module = load_module(load(SPEC), from_zoo=False)
    params = {key: 0.6 * rng.standard_normal(value.shape) for key, value in module.init_params(rng, **SIZES).items()}
    data = preprocessed(rng, steps, B, SIZES["d"])
    ys = rng.standard_normal((steps, B, SIZES["q"]))
    return params, np.concatenate(data, axis=2), ys, 0.5 * rng.standard_normal((B, SIZES["h"])), data


def paper(params, ys, h0, data, bug=None):
    """The outputs, the loss sum_t 1/2 ||s_t - y_t||^2 averaged over the batch, and torch.autograd's gradients."""
    leaves = {key: torch.tensor(value, requires_grad=True) for key, value in {**params, "h0": h0}.items()}
    outputs = paper_forward(leaves, *map(torch.tensor, data), leaves["h0"], bug)
    loss = 0.5 * ((outputs - torch.tensor(ys)) ** 2).sum() / ys.shape[1]
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)  # a mistake may read no x_mean
    pairs = zip(leaves.items(), grads, strict=True)
    grads = {key: np.zeros(leaf.shape) if grad is None else grad.numpy() for (key, leaf), grad in pairs}
    return outputs.detach().numpy(), float(loss.detach()), grads


def framework(backend):
    """(to the backend's arrays, back to NumPy)."""
    if backend == "torch":
        return torch.from_numpy, lambda a: a.detach().numpy()
    if backend == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        return jax.numpy.asarray, np.asarray
    return (lambda a: a), np.asarray


def assert_close(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    error = np.abs(got - want).max() / max(np.abs(want).max(), 1e-300)
    assert error <= TOL, f"{what}: {error:.2e}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_equals_the_papers_forward_and_its_autograd(backend):
    params, u, ys, h0, data = problem(seed=5)
    want_outputs, want_loss, want = paper(params, ys, h0, data)
    decays = params["w_gx"] * data[2] + params["b_gx"]
    assert (decays > 0).any() and (decays < 0).any()  # both sides of max(0, .) are taken
    module = load_module(load(SPEC), from_zoo=False, backend=backend)
    to, back = framework(backend)
    arrays = ({key: to(value) for key, value in params.items()}, to(u), to(ys))
    outputs, _ = module.forward(arrays[0], arrays[1], h0=to(h0))
    assert_close(back(outputs), want_outputs, (backend, "outputs"))
    for how in ("loss_and_grads", "forward_mode_grads"):
        loss, grads = getattr(module, how)(*arrays, h0=to(h0))
        assert abs(float(loss) - want_loss) <= TOL * abs(want_loss), (backend, how)
        assert set(grads) == set(want)
        for key, grad in grads.items():
            assert_close(back(grad), want[key], (backend, how, key))


def test_a_padded_batch_equals_the_papers_forward_of_each_sequence():
    """lengths=: each sequence's own steps through the paper's forward, the losses averaged over the batch."""
    params, u, ys, h0, data = problem(seed=6)
    lengths = np.array([T, 2, 4])
    module = load_module(load(SPEC), from_zoo=False)
    loss, grads = module.loss_and_grads(params, u, ys, h0=h0, lengths=lengths)
    want_loss, want = 0.0, {key: np.zeros_like(value) for key, value in grads.items()}
    for b, length in enumerate(lengths):
        one = (slice(None, length), slice(b, b + 1))
        _, loss_b, grads_b = paper(params, ys[one], h0[b : b + 1], [array[one] for array in data])
        want_loss += loss_b / B
        for key, grad in grads_b.items():
            if key == "h0":
                want[key][b] = grad[0] / B
            else:
                want[key] += grad / B
    assert abs(loss - want_loss) <= TOL * want_loss
    for key, grad in grads.items():
        assert_close(grad, want[key], ("lengths", key))


@pytest.mark.parametrize("bug", ["current x", "no mean"])
def test_the_published_mistakes_give_other_numbers(bug):
    """Control: the mistakes of two public implementations change the loss and the gradients well beyond the
    tolerance, so the comparison above tells the paper's equations from them."""
    params, u, ys, h0, data = problem(seed=5)
    loss, grads = load_module(load(SPEC), from_zoo=False).loss_and_grads(params, u, ys, h0=h0)
    _, wrong_loss, wrong = paper(params, ys, h0, data, bug)
    assert abs(loss - wrong_loss) > 1e-4 * abs(loss)
    assert np.abs(grads["x_mean"] - wrong["x_mean"]).max() > 1e-4 * np.abs(grads["x_mean"]).max()


def test_its_derivation_compiles(tmp_path):
    tex = tmp_path / "gru_d.tex"
    tex.write_text(document(load(SPEC), "tex"), encoding="utf-8")
    printed = pdflatex(tex)
    assert printed.pages >= 1
    for symbol in (r"\boldsymbol{\gamma}_{\textrm{x},t}", r"\operatorname{ReLU}", r"\mathbf{x}_\textrm{mean}"):
        assert symbol in tex.read_text(encoding="utf-8"), symbol


def test_bptt_check_takes_it_in_torch():
    """`bptt check --backend torch` of a cell that reads its input by blocks of rows: the checker's side-by-side
    sets (app/verify/sets.py) do not fit it, which torch says with a RuntimeError (not NumPy's ValueError); the
    checker then evaluates one set at a time, and every gradient agrees (before: an internal error, exit 3)."""
    result = bptt("check", SPEC, "--backend", "torch", "--steps", "2", "--batch", "1", "--sizes", "d=1,h=2,q=1")
    assert_ok(result)
    assert "all gradients agree" in result.stdout
