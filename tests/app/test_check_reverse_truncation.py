"""`bptt check --truncate` on models with reverse-time states: the truncated loss (app/verify/reverse_loss.py) truncates
each group of steps in its own time, built from the groups' forward passes only, so that an error planted in a reverse
group's truncated backward is caught; the CLI checks birnn (lengths too) and a two-layer stack in every mode."""

import types

import pytest

from bptt.app.verify.check import check
from bptt.runtime.options import Lengths
from bptt.tests.support.cli import REPO, bptt
from bptt.tests.support.modules import module_of

SIZES = {"d": 2, "h": 3, "q": 4}
EXAMPLES = REPO / "examples"


def planted(composed, change):
    """composed (the module's groups) whose reverse groups' backward truncates by change(truncate) instead."""

    class Planted(type(composed)):
        def _truncated(self, truncate, rng, options):
            found = super()._truncated(truncate, rng, options)
            return [
                {**mine, "truncate": change(mine["truncate"])} if sweep.reverse and mine["truncate"] else mine
                for sweep, mine in zip(self.sweeps, found, strict=True)
            ]

    wrong = Planted.__new__(Planted)
    wrong.__dict__.update(composed.__dict__)
    return wrong


PLANTS = {  # a reverse group's truncation off by one step, or its keep weights biased by 1%
    "window": (("window", 2), lambda truncate: ("window", truncate[1] + 1)),
    "chunk": (("chunk", 2), lambda truncate: ("chunk", truncate[1] + 1)),
    "random": (("random", 0.5), lambda truncate: ("random", truncate[1] * 1.01)),
}


@pytest.mark.parametrize("lengths", [None, "5,3,1"])
@pytest.mark.parametrize("mode", sorted(PLANTS))
def test_a_planted_error_in_a_reverse_groups_truncation_is_caught(mode, lengths, monkeypatch):
    module = module_of("birnn")
    truncate, change = PLANTS[mode]
    padded = None if lengths is None else Lengths.parse(lengths)
    rows = check(module, 5, 3, 0, sizes=SIZES, truncate=truncate, lengths=padded)
    assert all(row.ok for row in rows), rows  # the module as generated passes
    monkeypatch.setattr(module, "_SWEEPS", planted(module._SWEEPS, change))
    rows = check(module, 5, 3, 0, sizes=SIZES, truncate=truncate, lengths=padded)
    failed = {row.name for row in rows if not row.ok}
    assert {"U_b", "W_b"} <= failed, rows  # the reverse group's own parameters
    assert max(row.error for row in rows) > 1e-4, rows


def test_the_truncated_loss_of_reverse_states_is_not_full_bptts():
    """Control: full BPTT's gradient does not fit the truncated loss, so the checks above can fail."""
    module = module_of("birnn")
    untruncated = types.ModuleType("birnn_untruncated")
    untruncated.__dict__.update(module.__dict__)
    untruncated.loss_and_grads = lambda *args, truncate=None, **kwargs: module.loss_and_grads(*args, **kwargs)
    for truncate in (("window", 1), ("chunk", 2)):
        rows = check(untruncated, 5, 3, 0, sizes=SIZES, truncate=truncate)
        assert not all(row.ok for row in rows), (truncate, rows)


@pytest.mark.parametrize("truncate", ["window:1", "chunk:2", "random:0.5"])
@pytest.mark.parametrize("model, steps", [("birnn", "5"), (f"{EXAMPLES}/birnn.py:two_layers", "3")])
def test_bptt_check_truncates_reverse_states(model, steps, truncate, tmp_path):
    lengths = "3,2,1" if steps == "3" else "5,3,1"
    result = bptt("check", model, "--truncate", truncate, "--steps", steps, "--lengths", lengths, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = "equals full BPTT" if truncate.startswith("random") else "of the truncated loss"
    assert expected in result.stdout.splitlines()[-1], result.stdout
    if truncate.startswith("random"):  # every group's own keep patterns: 2**(G*T)
        groups = len(module_of("birnn")._SWEEPS.sweeps) if model == "birnn" else 4
        assert f"over all {2 ** (groups * int(steps))} keep patterns" in result.stdout, result.stdout


def test_too_many_keep_patterns_of_every_group_is_refused_in_one_line(tmp_path):
    result = bptt("check", "birnn", "--truncate", "random:0.5", "--steps", "7", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "2**(G*T)" in lines[0] and "G=2" in lines[0] and "T=7 is too long" in lines[0], lines[0]
    assert result.stdout == "" and list(tmp_path.iterdir()) == []
