"""A model with reverse-time states: `bptt codegen` writes its module in every backend (each proven against the
oracle in tests/oracle/test_reverse_codegen.py), which imports and trains, with --standalone too (importing nothing
of bptt); the commands that run what it does not support yet (check with a truncation, bench), and analyze and
exercises, refuse it in one line naming the model and the reverse states, exit 2, no traceback, no file written.
`bptt check` proves them in full BPTT, with lengths too."""

import importlib.util

import numpy as np
import pytest

from bptt.tests.support.cli import REPO, bptt

BIRNN = f"{REPO / 'examples' / 'birnn.py'}:birnn"


def test_codegen_writes_a_bidirectional_module_in_every_backend(tmp_path):
    result = bptt("codegen", BIRNN, "--backend", "all", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["birnn.py", "birnn_jax.py", "birnn_torch.py"]
    _trains(tmp_path / "birnn.py", "birnn_written")


def test_check_proves_a_bidirectional_module_with_lengths_in_every_backend(tmp_path):
    """bptt check of birnn in full BPTT with lengths: finite differences of the padded loss (each reverse state
    starting at its own sequence's last step), and each backend against NumPy."""
    result = bptt("check", BIRNN, "--lengths", "5,3,1", "--backend", "all", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("all gradients agree with finite differences") == 3, result.stdout
    assert "FAIL" not in result.stdout


@pytest.mark.parametrize(
    "args",
    [("check", BIRNN, "--truncate", "window:2"), ("bench", BIRNN), ("analyze", BIRNN), ("exercises", BIRNN)],
)
def test_commands_that_run_what_is_not_supported_refuse_reverse_states_in_one_line(args, tmp_path):
    result = bptt(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "model 'birnn'" in lines[0] and "cannot run reverse-time states yet (h_b, read at t+1)" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_a_standalone_module_with_reverse_states_imports_nothing_of_bptt(tmp_path):
    """--standalone carries the sweeps runtime too: the module imports its framework only, and trains."""
    result = bptt("codegen", BIRNN, "--standalone", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "birnn.py").read_text(encoding="utf-8")
    assert "import bptt" not in text and "from bptt" not in text
    _trains(tmp_path / "birnn.py", "birnn_standalone")


def _trains(path, label):
    """The module at path imports, and its loss_and_grads on a padded batch gives a finite loss and every
    gradient."""
    spec = importlib.util.spec_from_file_location(label, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(0)
    params = module.init_params(rng, d=2, h=3, q=4)
    xs, ys = module.random_inputs(rng, 5, 2, d=2, h=3, q=4)
    loss, grads = module.loss_and_grads(params, xs, ys, lengths=[5, 3])
    assert np.isfinite(loss) and set(grads) == {*module.PARAMS, "h_f0", "h_b0"}
