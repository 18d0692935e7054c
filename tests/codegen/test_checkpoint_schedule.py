"""The checkpoint schedule (codegen/printing/schedule.py): its count of step evaluations is the optimum of
Gruslys et al.'s dynamic programme, computed here independently by the full search over every split, and
its actions are a valid bounded-memory backward pass (simulated: every step backward once, last first, from
a state that is there, never more memory than the budget)."""

import pytest
from checkpoint_support import optimum

from bptt.codegen.printing import schedule


def simulate(T, actions, budget, state=1, step=1):
    """Run the actions on a model of memory (budget units, a kept state `state`, a stored step `step`);
    returns the step evaluations. Fails on an invalid action."""
    kept, current, done, evaluations = {0}, None, T, 0
    for action in actions:
        kind, a = action[0], action[1]
        used = (len(kept) - 1) * state  # the initial state is the caller's
        if kind == "advance":
            b, chunk = action[2], action[3]
            assert a in kept and a < b and used + chunk * step <= budget, action
            evaluations, current = evaluations + b - a, b
        elif kind == "keep":
            assert current == a and a not in kept, action
            kept.add(a)
        elif kind == "free":
            kept.remove(a)
        else:
            b = action[2]
            assert b == done and (a in kept or current == a), (action, done)
            assert used + (b - a) * step <= budget, (action, used)
            evaluations, done, current = evaluations + b - a, a, None
    assert done == 0 and kept == {0}
    return evaluations


def slots(count, T):
    return schedule._capacities(count, 1, 1, T)


@pytest.mark.parametrize(("slots_", "expected"), [(50, 1977), (10, 4165)])
def test_the_issues_examples(slots_, expected):
    actions = schedule._schedule(1000, slots(slots_, 1000))
    assert schedule._evaluations(actions) == expected == simulate(1000, actions, slots_)


def test_fifty_slots_cost_a_little_under_one_extra_pass():
    extra = schedule._evaluations(schedule._schedule(1000, slots(50, 1000))) / 1000 - 1
    assert round(extra, 2) == 0.98


@pytest.mark.parametrize("T", [1, 2, 3, 5, 8, 13, 40, 97, 150])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 12])
def test_slots_reach_the_optimum(T, count):
    actions = schedule._schedule(T, slots(count, T))
    assert simulate(T, actions, count) == schedule._evaluations(actions) == optimum(T, slots(count, T))


@pytest.mark.parametrize(
    ("budget", "state", "step"), [(20, 2, 3), (30, 1, 4), (17, 2, 3), (9, 4, 4), (40, 5, 6), (39, 1, 4), (36, 3, 6)]
)
@pytest.mark.parametrize("T", [6, 31, 120])
def test_byte_budgets_reach_the_optimum(T, budget, state, step):
    """Kept states and stored steps of different sizes (Gruslys's mixed variant). A stored step holds the
    state and more, so a kept state is never the larger (the search's shortcut is exact there)."""
    capacities = schedule._capacities(budget, state, step, T)
    actions = schedule._schedule(T, capacities)
    assert simulate(T, actions, budget, state, step) == schedule._evaluations(actions)
    assert schedule._evaluations(actions) == optimum(T, capacities)


def test_enough_memory_stores_every_step():
    assert schedule._schedule(30, slots(30, 30)) == (("backward", 0, 30),)


def test_one_slot_recomputes_from_the_start():
    actions = schedule._schedule(6, slots(1, 6))
    assert schedule._evaluations(actions) == 6 * 7 // 2 == simulate(6, actions, 1)


def test_long_sequences_stay_valid_and_near_the_optimum():
    """Beyond the exact tables the programme is solved on a coarser grid: still valid, and within 2 % of
    the exact optimum where that can be computed (T = 2000, 60 slots)."""
    capacities = slots(60, 2000)
    assert schedule._coarse_size(2000, capacities, 1) > schedule._EXACT  # beyond the exact tables
    actions = schedule._schedule(2000, capacities)
    assert simulate(2000, actions, 60) == schedule._evaluations(actions)
    exact = optimum_fast(2000, capacities)
    assert exact <= schedule._evaluations(actions) <= 1.02 * exact


def optimum_fast(T, capacities):
    """The exact programme for longer T: the schedule's own tables, unscaled (tested above against optimum)."""
    costs, _ = schedule._costs(T, capacities)
    return int(costs[T])


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "12", "0MiB", "lots", None, "3 parsecs"])
def test_bad_budgets_are_one_line_errors(bad):
    with pytest.raises(ValueError, match="checkpoints") as error:
        schedule._budget(bad, 64, 128)
    assert "\n" not in str(error.value)


def test_a_budget_below_one_step_is_refused():
    with pytest.raises(ValueError, match="holds no step: one stored step takes 4096 bytes"):
        schedule._budget("1KiB", 1024, 4096)


def test_byte_budgets_parse_their_units():
    assert schedule._bytes("32MiB") == 32 * 2**20
    assert schedule._bytes(" 500 kB ") == 500_000
    assert schedule._budget("1KiB", 100, 300) == (1024, 100, 300)
    assert schedule._bytes("1TiB") == 2**40
