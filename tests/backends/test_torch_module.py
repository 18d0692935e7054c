"""The torch backend's autograd.Function and nn.Module (issue 10, item 3): every zoo model's Model gives
the derived gradients through loss.backward(), truncation included; gradcheck passes in float64; an
optimiser trains it. (DDP: test_torch_ddp.py.)"""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")

import torch
from test_backend_torch import NAMES, SIZES, TRUNCATIONS, B, T, assert_grads_equal, modules, run_torch, zoo_problem


@pytest.fixture(scope="module", params=NAMES)
def problem(request):
    return zoo_problem(request.param)


def zoo_lstm(truncate=None, rng=None):
    _, torch_module = modules("lstm")
    model = torch_module.Model(**SIZES, truncate=truncate, rng=rng, init_rng=torch.Generator().manual_seed(0))
    xs, ys = torch_module.random_inputs(torch.Generator().manual_seed(1), T, B, **SIZES)
    return torch_module, model, xs, ys


@pytest.mark.parametrize("truncate", TRUNCATIONS, ids=lambda mode: "full" if mode is None else mode[0])
def test_module_backward_is_the_derived_one(truncate):
    """Model(...)'s loss.backward() leaves in .grad what loss_and_grads returns, truncation included
    (random: both from a generator seeded alike), initial states given as leaves included."""
    torch_module, model, xs, ys = zoo_lstm(truncate, torch.Generator().manual_seed(5))
    c0, h0 = (torch.randn(B, SIZES["h"], dtype=torch.float64, requires_grad=True) for _ in range(2))
    loss = model.loss(model(xs, c0, h0), ys)
    loss.backward()
    expected_loss, expected = torch_module.loss_and_grads(
        model.params(), xs, ys, c0.detach(), h0.detach(), truncate=truncate, rng=torch.Generator().manual_seed(5)
    )
    assert float(loss.detach()) == pytest.approx(float(expected_loss), rel=1e-14)
    got = {name: parameter.grad for name, parameter in model.named_parameters()} | {"c0": c0.grad, "h0": h0.grad}
    assert_grads_equal(got, expected, 1e-12, str(truncate))
    assert list(dict(model.named_parameters())) == list(torch_module.PARAMS)


def test_every_model_s_nn_module_gives_the_derived_gradients(problem):
    """Model(...) of every zoo model, teacher forcing and the mean over steps included: its loss and the
    .grad that loss.backward() leaves equal loss_and_grads (initial states given as leaves)."""
    name, _, torch_module, (params, xs, ys, initial) = problem
    model = torch_module.Model(**SIZES)
    with torch.no_grad():
        for key, value in params.items():
            getattr(model, key).copy_(torch.from_numpy(value))
    states = {key: torch.tensor(value, requires_grad=True) for key, value in initial.items()}
    teacher = (torch.from_numpy(ys),) if torch_module.TEACHER_FORCED else ()
    loss = model.loss(model(torch.from_numpy(xs), *teacher, **states), torch.from_numpy(ys))
    loss.backward()
    expected_loss, expected = run_torch(torch_module, (params, xs, ys, initial))
    assert abs(float(loss.detach()) - float(expected_loss)) <= 1e-12 * abs(float(expected_loss))
    got = {key: value.grad for key, value in model.named_parameters()} | {
        key: value.grad for key, value in states.items()
    }
    assert_grads_equal(got, expected, 1e-12, name)


@pytest.mark.parametrize("name", ["elman", "lstm"])
def test_gradcheck(name):
    """torch.autograd.gradcheck of the loss through BPTT (full BPTT: a truncated backward is not a gradient)."""
    _, torch_module = modules(name)
    sizes = {"d": 2, "h": 2, "q": 3}
    model = torch_module.Model(**sizes, init_rng=torch.Generator().manual_seed(0))
    xs, ys = torch_module.random_inputs(torch.Generator().manual_seed(1), 3, 2, **sizes)
    states = [torch.randn(2, 2, dtype=torch.float64, requires_grad=True) for _ in torch_module.STATES]
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]

    def loss(*leaves):
        outputs = torch_module.BPTT.apply(None, None, xs, *leaves[: len(states)], *leaves[len(states) :])
        return model.loss(outputs, ys)

    assert torch.autograd.gradcheck(loss, (*states, *params), eps=1e-6, atol=1e-8, rtol=1e-6)


def test_an_optimiser_trains_the_module():
    """An SGD step moves each nn.Parameter by -lr times the derived gradient; Adam's steps lower the loss."""
    torch_module, model, xs, ys = zoo_lstm()
    before = {name: value.detach().clone() for name, value in model.params().items()}
    _, grads = torch_module.loss_and_grads(before, xs, ys)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    model.loss(model(xs), ys).backward()
    optimiser.step()
    for name, value in model.params().items():
        assert torch.allclose(value.detach(), before[name] - 0.1 * grads[name], rtol=0, atol=1e-15), name
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)
    first = float(model.loss(model(xs), ys).detach())
    for _ in range(30):
        optimiser.zero_grad()
        model.loss(model(xs), ys).backward()
        optimiser.step()
    assert float(model.loss(model(xs), ys).detach()) < 0.6 * first


def test_clip_grads_scales_to_the_norm():
    _, torch_module = modules("elman")
    grads = {"a": torch.tensor([3.0, 0.0], dtype=torch.float64), "b": torch.tensor([[4.0]], dtype=torch.float64)}
    clipped = torch_module.clip_grads(grads, 1.0)
    assert torch.allclose(clipped["a"], torch.tensor([0.6, 0.0], dtype=torch.float64))
    assert torch.allclose(clipped["b"], torch.tensor([[0.8]], dtype=torch.float64))
    assert torch.equal(torch_module.clip_grads(grads, 10.0)["b"], grads["b"])


def test_inputs_that_require_grad_are_refused():
    """A layer in front of the model would get no gradient from the derived BPTT: Model and BPTT.apply refuse
    xs that requires grad with one line, and take it detached."""
    torch_module, model, xs, ys = zoo_lstm()
    front = torch.nn.Linear(SIZES["d"], SIZES["d"], dtype=torch.float64)
    upstream = front(xs)
    for run in (
        lambda: model(upstream),
        lambda: torch_module.BPTT.apply(None, None, upstream, None, None, *model.parameters()),
    ):
        with pytest.raises(ValueError, match=r"^xs requires grad: .*detach xs") as error:
            run()
        assert "\n" not in str(error.value)
    model.loss(model(upstream.detach()), ys).backward()
    assert all(parameter.grad is not None for parameter in model.parameters())
