"""A gate's elementwise terms added before its activation, so that gates' activations can be one call.

The peephole LSTM's i_t = sigmoid(i_t + p_i * c_{t-1}) (i_t holding what the fused product and the hoisted
terms wrote) becomes i_t += p_i * c_{t-1}, then i_t = sigmoid(i_t): the same calls, but now the gates'
activations are in place, so that fuse.activations joins neighbouring ones and halve.py halves them
(one tanh for z, i and f). Each added term moves up to just after what it reads at step t.
"""

from dataclasses import replace

from bptt.codegen.ir import Accumulate, Assign, groups_of, the_loop, with_body
from bptt.codegen.passes.fuse import sum_terms, views
from bptt.derive.atoms import atoms
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import SeqAt, matrix_sum, t
from bptt.derive.text import text


def split_activations(program):
    """The Program whose forward loop adds a gate's own elementwise terms before its activation (_split)."""
    forward = program.forward
    loop = the_loop(forward.statements)
    if loop is None:
        return program
    return replace(program, forward=with_body(forward, _split(list(loop.body), groups_of(forward))))


def _split(statements, groups):
    """statements with each X = f(X + e) of a member X of one of the groups split into X += e, placed as early
    as what e reads at step t allows, and X = f(X) where it was."""
    places = {name: (group.name, first, count) for group in groups for name, first, count in views(group)}
    members = {name for group in groups for name, _ in group.members}
    out, added_before = [], []
    for statement in statements:
        terms = _added(statement, members)
        if terms is None:
            out.append(statement)
            continue
        comment = f"{text(matrix_sum(terms))}: into the pre-activation of {text(statement.target)}"
        added = Accumulate(statement.target, matrix_sum(terms), comment)
        at = _earliest(out, added, places)
        while at < len(out) and out[at] in added_before:  # after those added there before it: in their order
            at += 1
        out.insert(at, added)
        added_before.append(added)
        out.append(Assign(statement.target, Apply(statement.value.function, statement.target), statement.comment))
    return out


def _added(statement, members):
    """The terms e of a statement X = f(X + e) on a group member X, or None."""
    if not (isinstance(statement, Assign) and isinstance(statement.value, Apply)):
        return None
    target = statement.target
    if not isinstance(target, SeqAt) or target.name not in members:
        return None
    _, terms = sum_terms(statement.value)
    rest = [term for term in terms if term != target]
    return rest if rest and len(rest) == len(terms) - 1 else None


def _earliest(statements, added, places):
    """The index after the last statement that writes what `added` reads at t, or its target's rows."""
    read = {r.name for r in atoms(added.value, SeqAt) if r.time == t}
    for k in range(len(statements) - 1, -1, -1):
        target = getattr(statements[k], "target", None)
        if isinstance(target, SeqAt) and (target.name in read or _overlaps(places, target.name, added.target.name)):
            return k + 1
    return 0


def _overlaps(places, name, other):
    """Whether the rows of two views of groups (groups, spans, members) share a row."""
    if name == other:
        return True
    if name not in places or other not in places:
        return False
    (group, first, count), (other_group, other_first, other_count) = places[name], places[other]
    return group == other_group and first < other_first + other_count and other_first < first + count
