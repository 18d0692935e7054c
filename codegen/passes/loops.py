"""Which computations must loop over time, and which can run on all steps at once.

Forward: a value is recurrent if it reads a (non-teacher-forced) state at t-1,
or a recurrent value at t. Only recurrent values that a later step reads need
the loop; every other value is one stacked expression, before or after it.
Backward: an adjoint is recurrent if the next step contributes to it, or if it
reads a recurrent adjoint. Only those loop, last step first; one that nothing left in
the loop reads is computed after it (scheduled_backward).
"""

from dataclasses import replace

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Assign, Loop, members_of, spliced, the_loop, walk
from bptt.derive.atoms import atoms
from bptt.derive.bptt import NEXT
from bptt.derive.nodes import Adj, SeqAt, time_shift


def _reads(expr, at):
    """Names read at time t + at."""
    return {r.name for r in atoms(expr, SeqAt) if time_shift(r.time) == at}


def loop_names(program):
    """The names the forward loop assigns, and the states it carries (those not teacher-forced)."""
    loop = the_loop(program.forward.statements)
    return {s.target.name for s in (loop.body if loop else ())} | _live(program.model)


def _live(model):
    return {seq.name for seq in model.states if seq not in model.forced}


def scheduled_forward(program):
    """The Program whose forward loop holds only the recursion: the values that read no state of the step
    before (through each other) stacked before it, those no later step reads after it (_schedule)."""
    forward = program.forward
    loop = the_loop(forward.statements)
    before, inside, after = _schedule(loop.body, _live(program.model))
    statements = spliced(forward.statements, loop, before + ([Loop(tuple(inside))] if inside else []) + after)
    return replace(program, forward=replace(forward, statements=statements))


def _schedule(steps, live_states):
    """(before, loop, after): the step assignments, in evaluation order.

    steps: the assignments of one step (outputs last); live_states: names of states not teacher-forced."""
    recurrent = set()
    for step in steps:
        if _reads(step.value, -1) & live_states or _reads(step.value, 0) & recurrent:
            recurrent.add(step.target.name)
    needed = set()
    for step in steps:
        needed |= _reads(step.value, -1) & live_states & recurrent
    for step in reversed(steps):
        if step.target.name in needed:
            needed |= _reads(step.value, 0) & recurrent
    before = [step for step in steps if step.target.name not in recurrent]
    loop = [step for step in steps if step.target.name in needed]
    after = [step for step in steps if step.target.name in recurrent - needed]
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
        reads_recurrent = [v for v in same if {a.of.name for a in atoms(v, Adj)} & recurrent]
        if nxt or reads_recurrent:
            recurrent.add(seq.name)
        local = [v for v in same if v not in reads_recurrent]
        parts[seq] = (local, reads_recurrent, nxt)
    return order, parts, recurrent


def scheduled_backward(program):
    """The Program whose backward loop keeps only the adjoints the recursion reads: one assigned in the loop that no
    statement left in it reads, at any step, nor writes, is computed after the loop for all steps at once (the
    adjoint of a normalised input projection, which only its weight's gradient reads). A member of a group stays:
    the flows read the group."""
    adjoints = program.adjoints
    loop = the_loop(adjoints.statements)
    if loop is None:
        return program
    body, after, grouped = list(loop.body), [], members_of(adjoints)
    for statement in reversed(loop.body):
        if not (isinstance(statement, Assign) and isinstance(statement.target, Adj)):
            continue
        if adjoint_array(statement.target.of.name) not in grouped and not _touched(statement, body):
            body.remove(statement)
            after.insert(0, statement)
    if not after:
        return program
    statements = spliced(adjoints.statements, loop, ([replace(loop, body=tuple(body))] if body else []) + after)
    return replace(program, adjoints=replace(adjoints, statements=statements))


def _touched(statement, body):
    """Whether a statement of body other than `statement` reads or writes its target's adjoint, at any step."""
    name = statement.target.of.name
    for other in walk(body):
        if other is statement or not hasattr(other, "value"):
            continue
        if name in {a.of.name for a in atoms(other.value, Adj)} or (
            isinstance(other.target, Adj) and other.target.of.name == name
        ):
            return True
    return False
