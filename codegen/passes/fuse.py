"""Gate products that share an operand become one product with the weights stacked.

In a gated cell every gate reads W_k h_{t-1}. The gates' arrays become views of
one stacked array (a group), the weights are stacked once per call, and one
product per step fills every gate: `[W_i; W_f; ...] h_{t-1}`. Statements that
do the same to neighbouring members (a sigmoid on i, f and o; their input
projections) become one statement on a span of the group. fuse_backward.py
does the same for the adjoints.
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.array_names import code_name
from bptt.codegen.ir import (
    PARAMETER,
    Accumulate,
    Array,
    Assign,
    Stack,
    Steps,
    groups_of,
    the_loop,
    with_body,
    with_groups,
)
from bptt.codegen.names import shown
from bptt.codegen.passes.loops import loop_names
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import SeqAt, matrix_sum, t
from bptt.derive.text import text


def fused_products(program):
    """The Program whose forward loop computes the products P_k v that two or more of its statements share as
    one product into a group of their arrays (_products), the weights stacked once per call."""
    forward = program.forward
    loop = the_loop(forward.statements)
    if loop is None:
        return program
    inside, stacks, groups = _products(list(loop.body), loop_names(program))
    members = {name for group in groups for name, _ in group.members}
    arrays = tuple(groups) + tuple(array for array in forward.arrays if array.name not in members)
    fused = replace(with_body(forward, inside), arrays=arrays, stacks=forward.stacks + tuple(stacks))
    return replace(program, forward=fused)


def fused_activations(program):
    """The Program whose forward loop applies one activation to neighbouring members of a group that the same
    function takes in place (_activations)."""
    forward = program.forward
    loop = the_loop(forward.statements)
    if loop is None:
        return program
    inside, groups = _activations(list(loop.body), groups_of(forward))
    return replace(program, forward=with_groups(with_body(forward, inside), groups))


def stacked_inputs(program):
    """The Program whose statements before the forward loop compute neighbouring members' hoisted terms of the
    same form (P x_t + b + ...) as one (_stacked)."""
    forward = program.forward
    loop = the_loop(forward.statements)
    if loop is None:
        return program
    at = forward.statements.index(loop)
    head, more, groups = _stacked(list(forward.statements[:at]), groups_of(forward))
    statements = (*head, *forward.statements[at:])
    stacked = replace(forward, statements=statements, stacks=forward.stacks + tuple(more))
    return replace(program, forward=with_groups(stacked, groups))


def sum_terms(value):
    """(rebuild, terms): the terms of value's sum, or of the sum inside its elementwise function; a sum among them
    (a norm's gain * x_hat + bias, expanded into an equation: derive/norms.py) gives its own terms."""
    if isinstance(value, Apply):
        return (lambda total: Apply(value.function, total)), _flat_terms(value.arg)
    return (lambda total: total), _flat_terms(value)


def _flat_terms(value):
    return [term for arg in value.args for term in _flat_terms(arg)] if isinstance(value, sp.MatAdd) else [value]


def _product(term):
    """(P, v) if term is a parameter matrix P times a sequence value v, else (None, None)."""
    if isinstance(term, sp.MatMul):
        coeff, factors = term.as_coeff_matrices()
        if coeff == 1 and len(factors) == 2:
            matrix, operand = factors
            if isinstance(matrix, PARAMETER) and matrix.shape[1] != 1 and isinstance(operand, SeqAt):
                return matrix, operand
    return None, None


LONGEST = 20  # the longest list of joined names a code name holds


def internal(names):
    """The code name of a group, a span or a stack: its members' names joined, `_i_f_o_g` (`_pre_f_pre_i`
    for `_pre_f`, `_pre_i`); the first and the last of them when that is longer than LONGEST characters,
    `_i_bar_to_g_bar` for i_bar, f_bar, o_bar, g_bar."""
    names = [name.lstrip("_") for name in names]
    joined = "_".join(names)
    return "_" + (joined if len(shown(joined)) <= LONGEST or len(names) < 3 else f"{names[0]}_to_{names[-1]}")


def total_rows(members):
    return sum((rows for _, rows in members), sp.S.Zero)


def span_seq(group, first, count, at=t):
    """The SeqAt of members first .. first + count - 1 of a group (the group itself if all)."""
    members = group.members[first : first + count]
    name = group.name if count == len(group.members) else internal(name for name, _ in members)
    return SeqAt(name, at, total_rows(members), "intermediate")


def views(group):
    """(name, first member, count) of the group, its spans and its members."""
    yield group.name, 0, len(group.members)
    yield from group.spans
    yield from ((name, k, 1) for k, (name, _) in enumerate(group.members))


def with_span(group, first, count):
    """The group with a view over members first .. first + count - 1."""
    name = span_seq(group, first, count).name
    if name == group.name or name in [span[0] for span in group.spans]:
        return group
    return Array(group.name, group.rows, group.steps, group.members, group.spans + ((name, first, count),))


def _function(statement):
    return statement.value.function if isinstance(statement.value, Apply) else ""


def _shared(statements, loop_names):
    """{operand: [(statement index, term, P)]}: products P v of a loop value v, one per statement."""
    found = {}
    for index, statement in enumerate(statements):
        if not isinstance(statement, Assign) or not isinstance(statement.target, SeqAt):
            continue
        per_operand = {}
        for term in sum_terms(statement.value)[1]:
            matrix, operand = _product(term)
            if matrix is not None and operand.name in loop_names:
                per_operand.setdefault(operand, []).append((index, term, matrix))
        for operand, items in per_operand.items():
            if len(items) == 1:
                found.setdefault(operand, []).extend(items)
    return found


def _products(statements, loop_names):
    """Fuse the loop's products P_k v that two or more statements share.

    Returns (statements, stacks, groups). The fused product is accumulated into the group before
    its first member; members are ordered by their elementwise function (the sigmoids together).
    Products of another operand that the same members share (a second layer's W_ih2 h1_t and
    W_hh2 h2_{t-1}) are a second product into the same group."""
    statements, stacks, groups, fused = list(statements), [], [], {}
    owner = {}  # statement index -> (its group, the group's statement indices in member order)
    for operand, items in sorted(_shared(statements, loop_names).items(), key=lambda kv: sp.default_sort_key(kv[0])):
        free = [item for item in items if item[0] not in owner]
        mine = {owner[i][0].name for i, _, _ in items if i in owner}
        if not free and len(mine) == 1 and len(items) == len(owner[items[0][0]][1]):
            order = owner[items[0][0]][1]
            group, items = owner[items[0][0]][0], sorted(items, key=lambda item: order.index(item[0]))
        elif len(free) >= 2:
            functions = list(dict.fromkeys(_function(statements[i]) for i, _, _ in free))
            items = sorted(free, key=lambda item: functions.index(_function(statements[item[0]])))
            members = tuple((statements[i].target.name, statements[i].target.rows) for i, _, _ in items)
            group = Array(internal(name for name, _ in members), total_rows(members), Steps.FROM_ZERO, members)
            owner.update({i: (group, [j for j, _, _ in items]) for i, _, _ in items})
            groups.append(group)
        else:
            continue
        stacks.append(Stack(internal(code_name(m) for _, _, m in items), tuple(m for _, _, m in items)))
        for index, term, _ in items:
            rebuild, terms = sum_terms(statements[index].value)
            rest = matrix_sum([x for x in terms if x != term], statements[index].target.rows)
            statements[index] = Assign(statements[index].target, rebuild(rest), statements[index].comment)
        weights = sp.MatrixSymbol(stacks[-1].name, group.rows, operand.rows)
        shown = "; ".join(text(m) for _, _, m in items)
        comment = f"[{shown}] {text(operand)}: the products of every gate at once"
        product = Accumulate(SeqAt(group.name, t, group.rows, "intermediate"), weights * operand, comment)
        fused.setdefault(min(owner[items[0][0]][1]), []).append(product)
    out = []
    for index, statement in enumerate(statements):
        out += fused.get(index, []) + [statement]
    return out, stacks, groups


def _activations(statements, groups):
    """Consecutive X = f(X) on neighbouring members of a group, with the same f, become one statement on their span."""
    where = {name: (group.name, k) for group in groups for k, (name, _) in enumerate(group.members)}
    by_name = {group.name: group for group in groups}
    runs = []
    for statement in _members_in_order(statements, where):
        place = _in_place(statement, where)
        last = runs[-1] if runs else None
        if place and last and last[0] and (last[0][0], last[0][1] + len(last[1]), last[0][2]) == place:
            last[1].append(statement)
        else:
            runs.append((place, [statement]))
    out = []
    for place, run in runs:
        if not place or len(run) < 2:
            out += run
            continue
        group, first, function = place
        by_name[group] = with_span(by_name[group], first, len(run))
        span = span_seq(by_name[group], first, len(run))
        out.append(Assign(span, Apply(function, span), "; ".join(s.comment for s in run)))
    return out, list(by_name.values())


def _members_in_order(statements, where):
    """Each block of consecutive X = f(X) on group members (independent of each other) in member order."""
    out, block = [], []
    for statement in statements + [None]:
        if statement is not None and _in_place(statement, where):
            block.append(statement)
            continue
        out += sorted(block, key=lambda s: _in_place(s, where)[:2])
        block = []
        out += [statement] if statement is not None else []
    return out


def _in_place(statement, where):
    """(group name, member index, f) if statement is X = f(X) for a member X of a group."""
    value = getattr(statement, "value", None)
    if isinstance(statement, Assign) and isinstance(value, Apply) and value.arg == statement.target:
        if statement.target.name in where:
            return (*where[statement.target.name], value.function)
    return None


def _stacked(statements, groups):
    """Hoisted statements of neighbouring members with the same form (P x_t + b + ...) become one:
    the weights stacked per operand, each member's bias vectors summed and stacked.
    Returns (statements, stacks, groups); members first, in group order (the statements are independent)."""
    where = {name: (group.name, k) for group in groups for k, (name, _) in enumerate(group.members)}
    by_name = {group.name: group for group in groups}
    members = sorted(
        (s for s in statements if getattr(s.target, "name", None) in where),
        key=lambda s: ([g.name for g in groups].index(where[s.target.name][0]), where[s.target.name][1]),
    )
    out = [s for s in statements if s not in members]
    stacks, run = [], []
    for statement in members + [None]:
        form = _form(statement, where) if statement is not None else None
        if run and form and _follows(run[-1][1], form):
            run.append((statement, form))
            continue
        if len(run) > 1:
            out.append(_merge(run, by_name, stacks))
        else:
            out += [s for s, _ in run]
        run = [(statement, form)] if statement is not None else []
    return out, stacks, list(by_name.values())


def _form(statement, where):
    """(group name, member index, {operand: P}, [bias vectors]) of a statement P v + ... + b; None if other terms."""
    group, index = where[statement.target.name]
    operands, biases = {}, []
    if isinstance(statement.value, Apply):
        return None
    for term in sum_terms(statement.value)[1]:
        matrix, operand = _product(term)
        if matrix is not None and operand not in operands:
            operands[operand] = matrix
        elif isinstance(term, PARAMETER) and term.shape[1] == 1:
            biases.append(term)
        else:
            return None
    return group, index, operands, biases


def _follows(previous, form):
    if previous is None or form is None:
        return False
    same_operands = set(previous[2]) == set(form[2]) and bool(previous[3]) == bool(form[3])
    return previous[0] == form[0] and previous[1] + 1 == form[1] and same_operands


def _merge(run, groups, stacks):
    """One statement on the span of the run's members."""
    name, first = run[0][1][0], run[0][1][1]
    groups[name] = with_span(groups[name], first, len(run))
    span = span_seq(groups[name], first, len(run))
    terms = []
    for operand in sorted(run[0][1][2], key=sp.default_sort_key):
        matrices = tuple(form[2][operand] for _, form in run)
        stacks.append(Stack(internal(code_name(m) for m in matrices), matrices))
        terms.append(sp.MatrixSymbol(stacks[-1].name, span.rows, operand.rows) * operand)
    if run[0][1][3]:
        parts = tuple(matrix_sum(form[3]) for _, form in run)
        stacks.append(Stack(f"_b{span.name}", parts))  # each member's biases summed: named after the span
        terms.append(sp.MatrixSymbol(stacks[-1].name, span.rows, 1))
    return Assign(span, matrix_sum(terms), "; ".join(statement.comment for statement, _ in run))
