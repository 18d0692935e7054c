"""Users' own cells from examples/: a gated cell and the two-state LSTM go through
the same machinery as the zoo, with nothing written for them in derive/ or codegen/."""

import pathlib

import numpy as np
import pytest

from bptt.app.verify.check import check, load_module
from bptt.codegen.names import check as check_code_names
from bptt.derive.model import ModelError
from bptt.derive.models import load

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
CELLS = [f"{EXAMPLES / 'gated_rnn.py'}:gated_rnn", f"{EXAMPLES / 'lstm.py'}:lstm"]


@pytest.fixture(scope="module", params=CELLS, ids=["gated", "lstm"])
def module(request):
    return load_module(load(request.param), from_zoo=False)


@pytest.mark.parametrize("truncate", [None, ("window", 2), ("chunk", 2)])
def test_cell_gradients_match_finite_differences(module, truncate):
    rows = check(module, steps=5, batch=2, seed=4, truncate=truncate)
    assert rows and all(row.ok for row in rows), "\n".join(f"{r.name}: {r.error:.1e}" for r in rows)
    assert {row.name for row in rows} == set(module.PARAMS) | set(module.STATES)


def test_cell_forward_mode_equals_bptt(module):
    rng = np.random.default_rng(5)
    sizes = {"d": 3, "h": 4, "q": 2}
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, 6, 2, **sizes)
    initial = {key: rng.standard_normal((2, sizes[size])) for key, size in module.STATES.items()}
    _, grads = module.loss_and_grads(params, xs, ys, **initial)
    _, forward = module.forward_mode_grads(params, xs, ys, **initial)
    for key in grads:
        assert np.abs(forward[key] - grads[key]).max() <= 1e-10 * np.abs(grads[key]).max(), key


def test_lstm_has_two_recurrent_states():
    module = load_module(load(CELLS[1]), from_zoo=False)
    assert module.STATES == {"c0": "h", "h0": "h"}


@pytest.mark.parametrize("name", ["lambda", "x-1", "xs", "params"])
def test_names_python_or_the_api_needs_are_refused(name, tmp_path):
    """Names Python cannot take are refused by the model; the API's words by codegen (the code's own names,
    keep or total, give way: tests/codegen/test_names.py)."""
    source = (
        (EXAMPLES / "gated_rnn.py")
        .read_text()
        .replace('sequence("z", h, "intermediate")', f'sequence("{name}", h, "intermediate")')
    )
    path = tmp_path / "cell.py"
    path.write_text(source)
    with pytest.raises(ModelError, match=repr(name)):  # lambda and x-1 when loading; xs, params when generating
        check_code_names(load(f"{path}:gated_rnn"))


def test_an_input_may_have_any_name(tmp_path):
    source = (EXAMPLES / "gated_rnn.py").read_text().replace('sequence("x", d, "input")', 'sequence("u", d, "input")')
    path = tmp_path / "cell.py"
    path.write_text(source)
    module = load_module(load(f"{path}:gated_rnn"), from_zoo=False)
    assert all(row.ok for row in check(module, steps=3, batch=2))
