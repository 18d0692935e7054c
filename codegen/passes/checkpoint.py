"""Checkpointing as a pass over the program: what a bounded-memory backward pass needs of the statements.

The schedule (runtime/schedule.py) cuts the steps into segments at run time; each segment's backward pass is
the program's own, over its steps, and step T of a segment reads what step T+1 would have given it from
the segment after it. This pass marks those reads: each Guard of the backward loop (the flows from step
t+1) becomes a Boundary whose second body reads, in place of the values at t+1, the values at step 1 of
the segment after (`_next_f`, `_d_next_a`: a Crossing each). It also sizes what memory the schedule weighs:
a kept state (the states the recursion carries) and one stored step (what the forward pass stores for the
backward pass, and the backward pass's own arrays: a group of steps of a model with reverse-time states also
returns the gradient of each value it reads from earlier groups, one per step), in rows per sample.
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Pass, rewrite, step_rows, walk
from bptt.codegen.ir_checkpoints import Boundary, Checkpoints, Crossing
from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj, SeqAt, t, time_shift, values
from bptt.derive.sweep_models import side_gradients

NEXT = "_next_"  # the prefix of a value read from the segment after


def checkpointed(program):
    """The Program with each Guard of its adjoints' and its window's loops a Boundary, and its Checkpoints:
    what a bounded-memory backward pass keeps, stores and hands across a boundary."""
    adjoints, crossings = with_boundaries(program.adjoints)
    window, window_crossings = with_boundaries(program.window)
    planned = replace(program, adjoints=adjoints, window=window)
    return replace(planned, checkpoints=_plan(planned, crossings, window_crossings))


def _crossing(node):
    """The Crossing of a value at t+1 (a SeqAt, or the adjoint of one)."""
    seq = node.of if isinstance(node, Adj) else node
    moved = SeqAt(NEXT + seq.name.lstrip("_"), 0, seq.rows, seq.role)
    read = Adj(moved) if isinstance(node, Adj) else moved
    name = adjoint_array(moved.name) if isinstance(node, Adj) else moved.name
    return Crossing(name, node, read, node.subs(t, 0))


def _reads_next(statements):
    """The values at t+1 the statements read (adjoints, and sequence values not under an adjoint)."""
    found = set()
    for statement in walk(statements):
        value = getattr(statement, "value", None)
        if value is None:
            continue
        found |= {a for a in atoms(value, Adj) if time_shift(a.of.time) == 1}
        found |= {s for s in values(value) if time_shift(s.time) == 1}
    return sorted(found, key=sp.default_sort_key)


def with_boundaries(a_pass):
    """(the Pass with each Guard of its loop a Boundary, the Crossings, sorted by name)."""
    crossings = {}

    def boundary(guard):
        nodes = _reads_next(guard.body)
        found = [_crossing(node) for node in nodes]
        crossings.update((c.name, c) for c in found)
        mapping = {node: c.read for node, c in zip(nodes, found, strict=True)}
        following = tuple(_substituted(s, mapping) for s in guard.body)
        return Boundary(guard.body, following, tuple(sorted(c.name for c in found)))

    statements = rewrite(a_pass.statements, guard=boundary)
    return Pass(statements, a_pass.arrays, a_pass.stacks), tuple(crossings[name] for name in sorted(crossings))


def _substituted(statement, mapping):
    return type(statement)(statement.target, statement.value.xreplace(mapping), statement.comment)


def _plan(program, crossings, window_crossings):
    """The Checkpoints of a program's passes (its adjoints with boundaries)."""
    model, recurrent = program.model, program.recurrent
    kept = tuple(model.states)
    targets = {
        s.target.of.name: s.target.of
        for s in walk(program.window.statements)
        if isinstance(getattr(s, "target", None), Adj)
    }
    aged = sum((seq.rows for name, seq in targets.items() if name in recurrent), sp.S.Zero)
    plain = sum((seq.rows for name, seq in targets.items() if name not in recurrent), sp.S.Zero)
    side = sum((seq.rows for seq, value in side_gradients(model) if not isinstance(value, sp.ZeroMatrix)), sp.S.Zero)
    return Checkpoints(
        kept=kept,
        reads=tuple(program.cache[1:]),
        state_rows=sum((seq.rows for seq in kept), sp.S.Zero),
        forward_rows=step_rows(program.forward.arrays),
        backward_rows=step_rows(program.adjoints.arrays) + plain + side,
        aged_rows=aged,
        crossings=crossings,
        window_crossings=window_crossings,
    )
