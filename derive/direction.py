"""Which way each state runs in time, and the sweeps that compute a step's assignments.

A state read at t-1 runs forward (h_0 enters before the first step); a state read at t+1 is a
reverse-time state (its initial value enters after the last step, at T+1, and it is computed from
step T back to step 1). A model runs as sweeps over time, alternately forward and in reverse: each
assignment in the first sweep after everything it reads, a state in a sweep of its own direction.
A bidirectional layer is two sweeps (forward, then reverse); the layer above that reads both, two more.
"""

import functools
from dataclasses import dataclass

import sympy as sp

from bptt.derive.atoms import atoms
from bptt.derive.nodes import SeqAt, T, t
from bptt.derive.refusal import Refusal

FORWARD, REVERSE = "forward", "reverse"


class DirectionError(ValueError):
    """States whose directions cannot be computed one after the other; the message names them."""


@dataclass(frozen=True)
class Sweep:
    """One pass over time: `direction`, and the steps' (Seq, rhs) it assigns, in the model's order."""

    direction: str
    steps: tuple

    def times(self, steps):
        """The steps 1..steps in the order this sweep visits them."""
        return range(1, steps + 1) if self.direction == FORWARD else range(steps, 0, -1)


def offsets(model):
    """{state name: set of time offsets (-1, +1) at which the model reads it}."""
    found = {}
    for _, rhs in model.assignments:
        for ref in _refs(rhs):
            offset = ref.time - t
            if offset in (-1, 1):
                found.setdefault(ref.name, set()).add(int(offset))
    return found


@functools.lru_cache(maxsize=256)  # asked for each state's boundary, by every derivation of the model
def directions(model):
    """{state Seq: FORWARD or REVERSE}; DirectionError if a state is read at both t-1 and t+1."""
    read = offsets(model)
    out = {}
    for seq in model.states:
        if read.get(seq.name) == {-1, 1}:
            later = _readers(model, seq.name, 1)
            raise DirectionError(
                f"{', '.join(f'{name}_t' for name in later)} read{'s' * (len(later) == 1)} {seq.name}_(t+1), "
                f"but {seq.name} is a forward state (read at t-1): "
                f"the forward state {seq.name} and the reverse state{'s' * (len(later) > 1)} "
                f"{', '.join(later)} depend on each other in a cycle"
            )
        out[seq] = REVERSE if read.get(seq.name) == {1} else FORWARD
    return out


def reverse_states(model):
    """The states read at t+1, in the model's order."""
    return tuple(seq for seq, way in directions(model).items() if way == REVERSE)


def forward_only(model, what):
    """Refuse a model with reverse-time states for `what` (the generated code, ...), naming the states."""
    reverse = [seq.name for seq in reverse_states(model)]
    if reverse:
        error = Refusal(f"{what} cannot run reverse-time states yet ({', '.join(reverse)}, read at t+1)")
        error.model = model.name
        raise error


def is_reverse(model, seq):
    return seq in reverse_states(model)


def initial_time(model, seq):
    """When a state's initial value enters: 0 for a forward state, T+1 for a reverse one."""
    return T + 1 if is_reverse(model, seq) else sp.S.Zero


@functools.lru_cache(maxsize=256)
def sweeps(model):
    """The model's steps grouped into Sweeps, in the order they run; DirectionError on a cycle."""
    way = directions(model)
    names = {seq.name: seq for seq, _ in model.steps}
    reads = {seq.name: {ref.name for ref in _refs(rhs) if ref.name in names} for seq, rhs in model.steps}
    sweep = dict.fromkeys(names, 0)
    limit = 2 * len(model.steps) + 2
    changed = True
    while changed:
        changed = False
        for seq, _ in model.steps:
            at = max([sweep[seq.name], *(sweep[name] for name in reads[seq.name])])
            if seq in way and (at % 2 == 1) != (way[seq] == REVERSE):
                at += 1
            if at > limit:
                raise DirectionError(_cycle(way, sweep, limit))
            changed |= at != sweep[seq.name]
            sweep[seq.name] = at
    used = sorted(set(sweep.values()))
    return tuple(
        Sweep(FORWARD if n % 2 == 0 else REVERSE, tuple((s, r) for s, r in model.steps if sweep[s.name] == n))
        for n in used
    )


@functools.lru_cache(maxsize=4096)  # each equation asked by offsets and by sweeps
def _refs(expr):
    """The sequence values an equation reads."""
    return tuple(expr.atoms(SeqAt))


def _cycle(way, sweep, limit):
    stuck = [seq for seq in way if sweep[seq.name] >= limit - 1]
    forward = [s.name for s in stuck if way[s] == FORWARD]
    reverse = [s.name for s in stuck if way[s] == REVERSE]
    return (
        f"the forward state{'s' * (len(forward) > 1)} {', '.join(forward)} and the reverse "
        f"state{'s' * (len(reverse) > 1)} {', '.join(reverse)} depend on each other in a cycle: "
        "neither direction can run before the other"
    )


def _readers(model, name, offset):
    return [
        seq.name
        for seq, rhs in model.assignments
        if any(r.name == name and r.time - t == offset for r in atoms(rhs, SeqAt))
    ]
