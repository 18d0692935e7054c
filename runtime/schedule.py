"""The checkpoint schedule of a backward pass in bounded memory: which states to keep, when to recompute
and what to free (Gruslys et al. 2016, "Memory-efficient backpropagation through time", the dynamic
programme over a memory budget).

Cost model: the first forward pass counts; a segment of steps that fits in memory is run forward once,
storing what its backward pass reads, and then backward; a kept state lets a later forward pass start
there. With s slots (a kept state or one stored step each) the fewest step evaluations Q(t, s) satisfy

    Q(t, s) = t                                       if t <= s (store every step)
    Q(t, 1) = t (t + 1) / 2                           (recompute each step from the start)
    Q(t, s) = min_{1 <= y < t} y + Q(t - y, s - 1) + Q(y, s)   (advance y steps, keep that state)

Memory is counted in units: a kept state takes `state` units, one stored step `step` units (what the
forward pass stores for the backward pass and the backward pass's own arrays); a byte budget weighs the two
as the derivation sizes them (Gruslys's mixed variant: storing a step's intermediates against
recomputing them from a kept state). Plain Python, framework-free: generated modules import it
(checkpoints.py's driver runs it), and a checkpoints argument (options.py) weighs its units here.
"""

import itertools

from bptt.runtime.options import _Checkpoints

_EXACT = 100_000  # table entries (levels x steps) up to which the programme is solved exactly (~0.2 s)
_COARSE = 1_000_000  # beyond: a coarser grid of at most this many entries, the search near the last split (~3 s)
_NEAR = 16  # splits tried past the last one beyond the exact tables
_SCHEDULES = {}  # (T, capacities) -> actions: the last few schedules computed, reused


def _capacities(budget, state, step, T):
    """How many steps a segment may store while k states are kept, k = 0, 1, ...: budget - k * state
    units, in whole steps, as long as one step fits, as far as T steps can use them (_fitted)."""
    return _fitted(((budget - kept * state) // step for kept in itertools.count()), T)


def _fitted(capacities, T):
    """The capacities T steps can use: with k states kept at most T - k steps are left, so no capacity is
    larger, and the levels stop at the first that stores all it can be given (no later level is reached):
    never more than T levels; (T,) is full BPTT's schedule. capacities: any iterable, read only so far."""
    out = []
    for capacity in capacities:
        left = T - len(out)
        if capacity < 1:
            break
        out.append(min(capacity, left))
        if capacity >= left:
            break
    return tuple(out)


def _zeros(count, kind):
    """count machine integers, zero: 8-byte signed ("q") or 4-byte unsigned ("I"), no Python int each."""
    return memoryview(bytearray(count * {"q": 8, "I": 4}[kind])).cast(kind)


def _one_leaf_costs(T, leaf):
    """Q(t) for t = 0..T when no further state can be kept: segments of `leaf` steps from the end, each
    reached from the start again: sum of the segments' last steps."""
    costs = _zeros(T + 1, "q")
    for t in range(1, T + 1):
        count = -(-t // leaf)
        costs[t] = count * t - leaf * count * (count - 1) // 2
    return costs


def _costs(T, capacities, near=None):
    """The programme's tables: (Q(t) at level 0 for t = 0..T, [split y of level k at t, ...]) where level k
    keeps k states. A split y = 0 is a segment stored whole. The best split moves forward with t: the
    search starts at the last one and stops where the cost starts to rise (exact where tested against the
    full search, tests/codegen/test_checkpoint_schedule.py, when a kept state is no larger than a stored step, as
    it never is: a stored step holds its state). near: try at most that many splits past the last one.
    Level k is read only at t <= T - k (each kept state is at least a step on): beyond, its entries stay 0."""
    deepest = len(capacities) - 1
    deeper = _one_leaf_costs(T, capacities[deepest])
    splits = [None] * (deepest + 1)
    for level in range(deepest - 1, -1, -1):
        costs, split = _zeros(T + 1, "q"), _zeros(T + 1, "I")  # 12 bytes a step
        whole = min(capacities[level], T)
        for t in range(1, whole + 1):
            costs[t] = t
        y = 1
        for t in range(whole + 1, T - level + 1):  # with `level` states kept, at most T - level steps are left
            best, best_y, z = y + deeper[t - y] + costs[y], y, y + 1
            stop = t if near is None else min(t, y + near)
            while z < stop:
                cost = z + deeper[t - z] + costs[z]
                if cost < best:
                    best, best_y = cost, z
                elif cost > best:
                    break
                z += 1
            costs[t], split[t], y = best, best_y, best_y
        splits[level], deeper = split, costs
    return deeper, splits


def _actions(T, capacities, splits, scale=1):
    """The schedule as actions, in order: ("advance", a, b, chunk) runs steps a+1..b from the state at a,
    storing at most chunk steps at a time; ("keep", b) keeps the state reached; ("backward", a, b) runs
    steps a+1..b from the state at a (kept, or just reached), storing them, then backward through them;
    ("free", a) drops a kept state. The tables count steps of `scale` real steps each (the last shorter)."""

    def at(step):
        return min(step * scale, T)

    out, todo = [], [("solve", 0, -(-T // scale), 0)]
    while todo:
        kind, a, t, level = todo.pop()
        if kind == "free":
            out.append(("free", at(a)))
        elif t <= capacities[level]:
            out.append(("backward", at(a), at(a + t)))
        elif level == len(capacities) - 1:  # no further state fits: segments from the end, each from a
            leaf = capacities[level]
            for end in range(t, 0, -leaf):
                start = max(end - leaf, 0)
                if start:
                    out.append(("advance", at(a), at(a + start), leaf * scale))
                out.append(("backward", at(a + start), at(a + end)))
        else:
            y = splits[level][t]
            out += [("advance", at(a), at(a + y), capacities[level] * scale), ("keep", at(a + y))]
            todo += [("solve", a, y, level), ("free", a + y, 0, 0), ("solve", a + y, t - y, level + 1)]
    return tuple(out)


def _schedule(T, capacities):
    """The actions of the optimal schedule for T steps (_actions), capacities from _capacities. Exact while
    the tables hold at most _EXACT entries; beyond, near the optimum: solved on a grid of groups of `scale`
    steps (kept states between groups) with at most _COARSE entries, each split sought near the last one
    (T = 10,000 with 100 slots: 0.7 % above the optimum); _evaluations counts what it costs."""
    if capacities[0] >= T:  # every step stored: full BPTT
        return (("backward", 0, T),)
    key = (T, capacities)
    if key not in _SCHEDULES:
        scale, near = 1, None
        if _coarse_size(T, capacities, 1) > _EXACT:
            near, scale = _NEAR, _scale(T, capacities)
        coarse = _grid(T, capacities, scale)
        _, splits = _costs(-(-T // scale), coarse, near)
        if len(_SCHEDULES) >= 8:
            _SCHEDULES.pop(next(iter(_SCHEDULES)))
        _SCHEDULES[key] = _actions(T, coarse, splits, scale)
    return _SCHEDULES[key]


def _scale(T, capacities):
    """The smallest group of steps whose grid's tables hold at most _COARSE entries (at most n levels of
    n groups each: groups of T / 1000 steps always fit), or the largest capacity."""
    scale = 1
    while _coarse_size(T, capacities, scale) > _COARSE and capacities[0] // (scale + 1) >= 1:
        scale += 1
    return scale


def _grid(T, capacities, scale):
    """The capacities in groups of `scale` steps, as far as the groups of T steps can use them (_fitted)."""
    return _fitted((c // scale for c in capacities), -(-T // scale))


def _coarse_size(T, capacities, scale):
    """The entries of the programme's tables on a grid of `scale` steps."""
    return len(_grid(T, capacities, scale)) * -(-T // scale)


def _evaluations(actions):
    """How many step evaluations the actions make: every step advanced or run before its backward pass."""
    return sum(action[2] - action[1] for action in actions if action[0] in ("advance", "backward"))


def _segments(T, steps):
    """Backward through stored values in segments of at most `steps` steps, the last segment first."""
    return tuple(("backward", max(end - steps, 0), end) for end in range(T, 0, -steps))


def _budget(checkpoints, state_bytes, step_bytes):
    """(budget, kept state, stored step) in one unit, _capacities's first arguments, of a checkpoints argument:
    a number of slots (a kept state or a stored step each) or a byte budget such as "32MiB"; ValueError in
    one line if it is neither or holds no step. Only parsed: as cheap for a terabyte as for a byte."""
    return _Checkpoints.of(checkpoints).budget(state_bytes, step_bytes)
