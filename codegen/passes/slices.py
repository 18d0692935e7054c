"""Neighbouring slices of one vector activated by one call.

Ba et al.'s LayerNorm-LSTM splits its normalised 4h vector a_t into four gates: f_t = sigmoid(a_t[:h]),
i_t = sigmoid(a_t[h:2h]), o_t = sigmoid(a_t[2h:3h]), g_t = tanh(a_t[3h:]). Their targets become the members of one
group (views of consecutive rows of one array, as fused gates' are), and each run of the same function over
neighbouring slices one statement on the run's span: sigmoid(a_t[:3h]) into f, i, o at once, then tanh(a_t[3h:]).
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.ir import Array, Assign, members_of, the_loop, with_body
from bptt.codegen.passes.fuse import internal, span_seq, total_rows, with_span
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import SeqAt, equal, t


def activated_slices(program):
    """The Program whose forward loop activates each run of neighbouring slices of one vector that one function
    takes in one statement, the slices' targets members of one group (_runs)."""
    forward = program.forward
    loop = the_loop(forward.statements)
    if loop is None:
        return program
    arrays = {array.name: array for array in forward.arrays}
    body, groups = list(loop.body), []
    for run in _runs(body, members_of(forward), arrays):
        group = Array(internal(s.target.name for s in run), total_rows(_members(run)), arrays[run[0].target.name].steps)
        group = replace(group, members=_members(run))
        at = body.index(run[0])
        statements, first = [], 0
        for same in _same_function(run):
            if len(same) > 1:
                group = with_span(group, first, len(same))
            statements.append(_one(same, span_seq(group, first, len(same))) if len(same) > 1 else same[0])
            first += len(same)
        body[at : at + len(run)] = statements
        groups.append(group)
    if not groups:
        return program
    taken = {name for group in groups for name, _ in group.members}
    kept = tuple(array for array in forward.arrays if array.name not in taken)
    return replace(program, forward=replace(with_body(forward, body), arrays=kept + tuple(groups)))


def _sliced(statement):
    """(vector, first row, stop row, function) if statement is X_t = f(v_t[first:stop, :]), else None."""
    value = getattr(statement, "value", None)
    if not (isinstance(statement, Assign) and isinstance(statement.target, SeqAt) and isinstance(value, Apply)):
        return None
    arg = value.arg
    if not isinstance(arg, sp.MatrixSlice) or not isinstance(arg.parent, SeqAt) or arg.rowslice[2] != 1:
        return None
    return arg.parent, arg.rowslice[0], arg.rowslice[1], value.function


def _runs(body, grouped, arrays):
    """Runs of two or more consecutive statements on neighbouring slices of one vector, where some two neighbours
    apply the same function, whose targets are plain arrays of the step (no group's members) with one kind of steps."""
    runs, run = [], []
    for statement in [*body, None]:
        sliced = _sliced(statement) if statement is not None else None
        plain = sliced and statement.target.time == t and statement.target.name in arrays
        plain = plain and statement.target.name not in grouped
        if plain and run and _follows(_sliced(run[-1]), sliced):
            run.append(statement)
            continue
        if len(run) > 1 and any(len(same) > 1 for same in _same_function(run)):
            if len({arrays[s.target.name].steps for s in run}) == 1:
                runs.append(run)
        run = [statement] if plain else []
    return runs


def _follows(previous, sliced):
    return previous[0] == sliced[0] and equal(previous[2], sliced[1])


def _same_function(run):
    """The run cut where the function changes."""
    out = []
    for statement in run:
        if out and _sliced(out[-1][-1])[3] == _sliced(statement)[3]:
            out[-1].append(statement)
        else:
            out.append([statement])
    return out


def _members(run):
    return tuple((s.target.name, s.target.rows) for s in run)


def _one(same, span):
    """One statement for neighbouring slices under one function: f(v_t[first of the first : stop of the last])."""
    vector, first, _, function = _sliced(same[0])
    stop = _sliced(same[-1])[2]
    value = Apply(function, sp.MatrixSlice(vector, (first, stop, 1), (0, 1, 1)))
    return Assign(span, value, "; ".join(s.comment for s in same))
