"""A model with reverse-time states: every command that runs generated code (codegen with each backend, check,
bench), and analyze and exercises, refuse it in one line naming the model and the
reverse states, exit 2, no traceback, no file written."""

import pytest

from bptt.tests.support.cli import REPO, bptt

BIRNN = f"{REPO / 'examples' / 'birnn.py'}:birnn"


@pytest.mark.parametrize(
    "args",
    [
        ("codegen", BIRNN, "--backend", "numpy"),
        ("codegen", BIRNN, "--backend", "torch"),
        ("codegen", BIRNN, "--backend", "jax"),
        ("codegen", BIRNN, "--backend", "all"),
        ("check", BIRNN),
        ("bench", BIRNN),
        ("analyze", BIRNN),
        ("exercises", BIRNN),
    ],
)
def test_commands_that_run_code_refuse_reverse_states_in_one_line(args, tmp_path):
    result = bptt(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "model 'birnn'" in lines[0] and "cannot run reverse-time states yet (h_b, read at t+1)" in lines[0]
    assert list(tmp_path.iterdir()) == []
