"""`bptt bench MODEL --checkpoints s1,s2,...`: a row per budget next to full BPTT's, the gradients checked
first, the schedule's evaluations as printing/schedule.py counts them, -o's CSV and PNG; a benchmark, so
no time is asserted. Bad budgets are usage errors (exit 2, one line)."""

import csv

import pytest
from cli_support import assert_error, assert_ok, bptt

from bptt.app.bench.checkpoints import COLUMNS
from bptt.codegen.printing import schedule
from bptt.generated import elman

SMALL = ("--steps", "20", "--batch", "2", "--sizes", "d=2,h=3,q=4", "--dtype", "float64", "--repeats", "1")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_row_per_budget_checked_against_full_bptt(tmp_path, backend):
    result = bptt("bench", "elman", *SMALL, "--backend", backend, "--checkpoints", "3,5,2KiB", "-o", tmp_path)
    assert_ok(result)
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[2:] if line.strip()}
    assert list(rows) == ["full", "3", "5", "2KiB"]
    for budget in (3, 5):
        assert int(rows[str(budget)][1]) == schedule._evaluations(schedule._schedule(20, schedule._capacities(budget, 1, 1)))
    state, forward_step, backward_step = elman._checkpoint_bytes({"d": 2, "h": 3, "q": 4}, 2, 8, 1)
    capacities = schedule._budget("2KiB", state, forward_step + backward_step)
    assert int(rows["2KiB"][1]) == schedule._evaluations(schedule._schedule(20, capacities))
    assert all(float(row[-1]) <= 1e-12 for row in rows.values())  # the gradients agree with full BPTT's
    with open(tmp_path / "checkpoints.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    assert tuple(table[0]) == COLUMNS and [row[0] for row in table[1:]] == list(rows)
    assert (tmp_path / "checkpoints.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--checkpoints", "0"), "checkpoints must be a positive integer"),
        (("--checkpoints", "2.5"), "checkpoints must be a positive integer"),
        (("--checkpoints", "3,lots"), "got 'lots'"),
        (("-o", "."), "only with --checkpoints"),
        (("--checkpoints", "3", "-o", "no/such/folder"), "does not exist"),
    ],
)
def test_bad_budgets_are_usage_errors(args, fragment):
    assert_error(bptt("bench", "elman", *SMALL, *args), 2, fragment)
