"""Each feature that refuses reverse-time states (tests/support/zoo.py's REFUSED) refuses each such zoo model in one
line: the CLI exits 2 with one line on stderr naming the model and its reverse states, no traceback, no file
written; a generated module's call raises a ValueError of one line."""

import numpy as np
import pytest

from bptt.derive.direction import reverse_states
from bptt.derive.models import load
from bptt.tests.support.cli import bptt
from bptt.tests.support.modules import module_of
from bptt.tests.support.zoo import REFUSED, WITH_REVERSE_STATES

CLI = {
    "bench": ("bench",),
    "analyze": ("analyze",),
    "exercises": ("exercises",),
}
SIZES = {"d": 2, "h": 3, "q": 4}


def _truncated_checkpoints(name):
    module = module_of(name)
    rng = np.random.default_rng(0)
    params, (xs, ys) = module.init_params(rng, **SIZES), module.random_inputs(rng, 4, 2, **SIZES)
    module.loss_and_grads(params, xs, ys, truncate=("window", 2), checkpoints=2)


def _forward_mode_grads(name):
    module = module_of(name)
    rng = np.random.default_rng(0)
    module.forward_mode_grads(module.init_params(rng, **SIZES), *module.random_inputs(rng, 4, 2, **SIZES))


CALLS = {"truncated_checkpoints": _truncated_checkpoints, "forward_mode_grads": _forward_mode_grads}


def test_every_refusal_is_tested_here():
    assert set(CLI) | set(CALLS) == set(REFUSED) and not set(CLI) & set(CALLS)


@pytest.mark.parametrize("feature", sorted(CLI))
@pytest.mark.parametrize("name", WITH_REVERSE_STATES)
def test_the_cli_refuses_reverse_states_in_one_line(name, feature, tmp_path):
    command, *options = CLI[feature]
    result = bptt(command, name, *options, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"model '{name}'" in lines[0] and "reverse-time states" in lines[0], lines[0]
    states = ", ".join(seq.name for seq in reverse_states(load(name)))
    assert f"cannot run reverse-time states yet ({states}, read at t+1)" in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("feature", sorted(CALLS))
@pytest.mark.parametrize("name", WITH_REVERSE_STATES)
def test_a_generated_module_refuses_reverse_states_in_one_line(name, feature):
    with pytest.raises(ValueError, match="with reverse-time states") as caught:
        CALLS[feature](name)
    assert len(str(caught.value).splitlines()) == 1
