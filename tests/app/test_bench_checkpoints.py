"""`bptt bench MODEL --checkpoints s1,s2,...`: a row per budget next to full BPTT's, the gradients checked
first, the schedule's evaluations as runtime/schedule.py counts them, -o's CSV and PNG; a benchmark, so
no time is asserted. Bad budgets are usage errors (exit 2, one line). The NumPy module's bench runs as a user
runs it; torch's and the errors in this process (the child's measurement called as bench's child would)."""

import csv
import json
import tracemalloc

import pytest

from bptt.app import cli
from bptt.app.bench import bench, checkpoints
from bptt.app.bench.checkpoints import COLUMNS
from bptt.generated import elman
from bptt.runtime import schedule
from bptt.tests.support.cli import assert_ok, bptt

SMALL = ("--steps", "20", "--batch", "2", "--sizes", "d=2,h=3,q=4", "--dtype", "float64", "--repeats", "1")


def rows_of(stdout):
    """{budget: the cells of its row} of the table bench prints."""
    return {line.split()[0]: line.split() for line in stdout.splitlines()[2:] if line.strip()}


def test_a_row_per_budget_checked_against_full_bptt(tmp_path):
    folder = tmp_path / "made"  # -o makes the folder when its parent exists, as analyze -o does
    result = bptt("bench", "elman", *SMALL, "--checkpoints", "3,5,2KiB", "-o", folder)
    assert_ok(result)
    rows = rows_of(result.stdout)
    assert list(rows) == ["full", "3", "5", "2KiB"]
    for budget in (3, 5):
        assert int(rows[str(budget)][1]) == schedule._evaluations(
            schedule._schedule(20, schedule._capacities(budget, 1, 1, 20))
        )
    state, forward_step, backward_step = elman._PASSES.checkpoint_bytes({"d": 2, "h": 3, "q": 4}, 2, 8, 1)
    capacities = schedule._capacities(*schedule._budget("2KiB", state, forward_step + backward_step), 20)
    assert int(rows["2KiB"][1]) == schedule._evaluations(schedule._schedule(20, capacities))
    assert all(float(row[-1]) <= 1e-12 for row in rows.values())  # the gradients agree with full BPTT's
    with open(folder / "checkpoints.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    assert tuple(table[0]) == COLUMNS and [row[0] for row in table[1:]] == list(rows)
    assert (folder / "checkpoints.png").read_bytes().startswith(b"\x89PNG")


def test_the_torch_module_in_bounded_memory(monkeypatch, capsys):
    """--backend torch: the child measures the torch module's loss_and_grads per budget (its spec as JSON)."""
    pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
    monkeypatch.setattr(bench, "pin", lambda cpu=None: 0)  # the test's own process: not pinned to a core
    monkeypatch.setattr(bench, "launch", lambda spec: bench.main([json.dumps(spec, sort_keys=True)]))
    assert cli.main(["bench", "elman", *SMALL, "--backend", "torch", "--checkpoints", "4,1KiB"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("elman float64 (torch): T=20 B=2")
    rows = rows_of(out)
    assert list(rows) == ["full", "4", "1KiB"] and int(rows["full"][1]) == 20
    assert int(rows["4"][1]) == schedule._evaluations(schedule._schedule(20, schedule._capacities(4, 1, 1, 20)))
    assert all(float(row[-1]) <= 1e-12 for row in rows.values())


def test_budgets_past_full_bptt_are_parsed_at_once_and_run_as_full_bptt(monkeypatch, capsys):
    """Issue 25: "1GiB" and 10**12 failed with a MemoryError while parsing (a table entry per byte or slot).
    Parsed in constant memory; measured, each is full BPTT's schedule: T step evaluations, its gradients."""
    tracemalloc.start()
    assert checkpoints.parse("1GiB, 1000000000000,1TiB") == ["1GiB", 10**12, "1TiB"]
    assert tracemalloc.get_traced_memory()[1] < 64 * 1024
    tracemalloc.stop()
    monkeypatch.setattr(bench, "pin", lambda cpu=None: 0)  # the test's own process: not pinned to a core
    monkeypatch.setattr(bench, "launch", lambda spec: bench.main([json.dumps(spec, sort_keys=True)]))
    assert cli.main(["bench", "elman", *SMALL, "--checkpoints", "1GiB,1000000000000"]) == 0
    rows = rows_of(capsys.readouterr().out)
    assert list(rows) == ["full", "1GiB", "1000000000000"]
    assert all(int(row[1]) == 20 and float(row[-1]) == 0 for row in rows.values())


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--checkpoints", "0"), "checkpoints must be a positive integer"),
        (("--checkpoints", "2.5"), "checkpoints must be a positive integer"),
        (("--checkpoints", "3,lots"), "got 'lots'"),
        (("-o", "."), "only with --checkpoints"),
        (("--checkpoints", "3", "-o", "/nonexistent/folder"), "does not exist"),
    ],
)
def test_bad_budgets_are_usage_errors(args, fragment, monkeypatch, capsys):
    monkeypatch.setattr(bench, "launch", lambda spec: pytest.fail("bench measured a bad budget"))
    assert cli.main(["bench", "elman", *SMALL, *args]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err
