"""Which computations must loop over time, and which can run on all steps at once.

Forward: a value is recurrent if it reads a (non-teacher-forced) state at t-1,
or a recurrent value at t. Only recurrent values that a later step reads need
the loop; every other value is one stacked expression, before or after it.
Backward: an adjoint is recurrent if the next step contributes to it, or if it
reads a recurrent adjoint. Only those loop, last step first.
"""

import sympy as sp

from bptt.derive.bptt import NEXT
from bptt.derive.nodes import Adj, SeqAt, t


def reads(expr, at):
    """Names read at time t + at."""
    return {r.name for r in expr.atoms(SeqAt) if sp.simplify(r.time - t) == at}


def forward_schedule(steps, live_states):
    """(before, loop, after): the step assignments (Seq, rhs), in evaluation order.

    steps: the assignments of one step (outputs last); live_states: names of states not teacher-forced."""
    recurrent = set()
    for seq, rhs in steps:
        if reads(rhs, -1) & live_states or reads(rhs, 0) & recurrent:
            recurrent.add(seq.name)
    needed = set()
    for _, rhs in steps:
        needed |= reads(rhs, -1) & live_states & recurrent
    for seq, rhs in reversed(steps):
        if seq.name in needed:
            needed |= reads(rhs, 0) & recurrent
    before = [(seq, rhs) for seq, rhs in steps if seq.name not in recurrent]
    loop = [(seq, rhs) for seq, rhs in steps if seq.name in needed]
    after = [(seq, rhs) for seq, rhs in steps if seq.name in recurrent - needed]
    return before, loop, after


def backward_schedule(derivation):
    """{Seq: (local, stepwise, next)} for every adjoint, and the set of recurrent names.

    local: values of this step that read no recurrent adjoint (stacked);
    stepwise: values of this step that read one (in the loop); next: the next step's.
    """
    model = derivation.model
    contributions = {**derivation.states, **derivation.intermediates}
    order = [seq for seq, _ in reversed(model.steps) if seq in contributions]
    recurrent, parts = set(), {}
    for seq in order:
        same = [c.value for c in contributions[seq] if c.when != NEXT]
        nxt = [c.value for c in contributions[seq] if c.when == NEXT]
        reads_recurrent = [v for v in same if {a.of.name for a in v.atoms(Adj)} & recurrent]
        if nxt or reads_recurrent:
            recurrent.add(seq.name)
        local = [v for v in same if v not in reads_recurrent]
        parts[seq] = (local, reads_recurrent, nxt)
    return order, parts, recurrent
