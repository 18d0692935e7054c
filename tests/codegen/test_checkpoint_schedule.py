"""The checkpoint schedule (runtime/schedule.py): its count of step evaluations is the optimum of
Gruslys et al.'s dynamic programme, computed here independently by the full search over every split, and
its actions are a valid bounded-memory backward pass (simulated: every step backward once, last first, from
a state that is there, never more memory than the budget)."""

import tracemalloc

import pytest

from bptt.runtime import options, schedule
from bptt.tests.support.checkpoints import optimum


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
    assert options._bytes("32MiB") == 32 * 2**20
    assert options._bytes(" 500 kB ") == 500_000
    assert schedule._budget("1KiB", 100, 300) == (1024, 100, 300)
    assert options._bytes("1TiB") == 2**40


HUGE = (10**12, "1000000GiB", "1TiB")  # issue 25: a budget far past what full BPTT needs


def unfitted(budget, state, step):
    """Every level a budget could hold, however many steps there are (what _capacities built before issue 25)."""
    return tuple((budget - kept * state) // step for kept in range((budget - step) // state + 1))


@pytest.mark.parametrize(
    ("budget", "state", "step"), [(5, 1, 1), (12, 1, 1), (40, 1, 1), (20, 2, 3), (60, 1, 4), (90, 2, 3), (200, 1, 1)]
)
@pytest.mark.parametrize("T", [1, 2, 7, 13, 40])
def test_fitting_the_capacities_to_T_keeps_the_optimum(T, budget, state, step):
    """The levels T steps cannot reach and the capacity past the steps left are dropped: the same optimum
    as over every level the budget holds (the full search), at most T levels, none larger than T."""
    capacities, every = schedule._capacities(budget, state, step, T), unfitted(budget, state, step)
    last = len(capacities) - 1
    assert last < T and capacities[:last] == every[:last] and capacities[last] == min(every[last], T - last)
    actions = schedule._schedule(T, capacities)
    assert simulate(T, actions, budget, state, step) == schedule._evaluations(actions)
    assert schedule._evaluations(actions) == optimum(T, capacities) == optimum(T, every)


@pytest.mark.parametrize("budget", HUGE)
def test_a_budget_is_parsed_in_constant_memory(budget):
    """_budget only parses: (budget, kept state, stored step) in one unit, no table per slot or byte."""
    expected = {10**12: (10**12, 1, 1), "1000000GiB": (10**6 * 2**30, 64, 128), "1TiB": (2**40, 64, 128)}[budget]
    tracemalloc.start()
    assert schedule._budget(budget, 64, 128) == expected
    assert schedule._budget(budget, 1, 1)[0] == expected[0]  # as torch's Model and bench check a budget
    assert tracemalloc.get_traced_memory()[1] < 16 * 1024
    tracemalloc.stop()


@pytest.mark.parametrize("budget", HUGE)
@pytest.mark.parametrize("T", [1, 7, 100_000])
def test_a_budget_past_full_bptt_is_one_segment(T, budget):
    capacities = schedule._capacities(*schedule._budget(budget, 64, 128), T)
    assert capacities == (T,)
    assert schedule._schedule(T, capacities) == (("backward", 0, T),)


def test_a_byte_budget_has_a_level_per_usable_slot_only():
    """A kept state far smaller than a stored step: 995,001 levels could hold a state and a step; with 300
    steps the levels stop at the first k whose 200 - k / 5000 steps (rounded down) hold the 300 - k left."""
    capacities = schedule._capacities(10**6, 1, 5000, 300)
    last = next(k for k in range(300) if (10**6 - k) // 5000 >= 300 - k)
    assert len(unfitted(10**6, 1, 5000)) == 995_001 and len(capacities) == last + 1 < 300
    assert capacities[:-1] == unfitted(10**6, 1, 5000)[:last] and capacities[-1] == 300 - last
    assert schedule._evaluations(schedule._schedule(300, capacities)) == optimum_fast(300, capacities)


def test_the_coarse_grid_drops_the_levels_its_groups_cannot_reach():
    """T = 100,000 with 99,999 slots: a grid of 50,000 groups of two steps, one level (a grid fitted to the
    levels the budget holds, not to those it can reach, had groups of 9,091 steps: 9 % more evaluations).
    The tables and capacities stay within a few MiB (tracemalloc), the schedule within 0.01 % of one pass."""
    T = 100_000
    tracemalloc.start()
    capacities = slots(99_999, T)
    actions = schedule._schedule(T, capacities)
    assert tracemalloc.get_traced_memory()[1] < 16 * 2**20
    tracemalloc.stop()
    scale = schedule._scale(T, capacities)
    assert scale == 2 and schedule._grid(T, capacities, scale) == (49_999, 49_999)
    assert simulate(T, actions, 99_999) == schedule._evaluations(actions) <= 1.0001 * T
