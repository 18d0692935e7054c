"""sigmoid(z) = (1 + tanh(z / 2)) / 2 with z / 2 from weights and biases halved once per call: in a
gated cell the gates' sigmoids join the tanh of the candidate in one call (see halve_sigmoids)."""

import sympy as sp

from bptt.codegen.ir import Accumulate, Assign, Stack
from bptt.codegen.passes.fuse import span_seq
from bptt.derive.elementwise import Apply


def halve_sigmoids(inside, hoisted, stacks, groups):
    """sigmoid(z) = (1 + tanh(z / 2)) / 2 with z / 2 from weights and biases halved once per call: a
    span's in-place sigmoid joins the tanh of the span beside it (one call for every gate) and is then
    scaled: 3 calls instead of 5 for an LSTM's gates. Only for gates that nothing but the fused product
    and the hoisted terms write into. Returns (inside, hoisted, stacks)."""
    spans = {name: (group, first, count) for group in groups for name, first, count in _views(group)}
    plan = {k: spans[s.target.name] for k, s in enumerate(inside) if _halvable(s, inside, spans)}
    if not plan:
        return inside, hoisted, stacks
    halved, out, skip = {}, [], set()
    for index, statement in enumerate(inside):
        if index in skip:
            continue
        if index not in plan:
            out.append(statement)
            continue
        group, first, count = plan[index]
        halved.setdefault(group.name, set()).update(range(first, first + count))
        follow = inside[index + 1] if index + 1 < len(inside) else None
        place = spans.get(getattr(getattr(follow, "target", None), "name", None))
        joined = _in_place_function(follow) == "tanh" and place and place[0] is group and place[1] == first + count
        wide = span_seq(group, first, count + place[2]) if joined else statement.target
        comment = f"{statement.comment}; {follow.comment}" if joined else statement.comment
        skip |= {index + 1} if joined else set()
        out.append(Assign(wide, Apply("tanh", wide), comment))
        half = sp.Rational(1, 2)
        out.append(
            Assign(
                statement.target,
                half * statement.target + half * sp.OneMatrix(*statement.target.shape),
                "(1 + tanh(z / 2)) / 2: the sigmoid",
            )
        )
    out, hoisted, more = _halve_inputs(out, hoisted, stacks, groups, halved)
    return out, hoisted, list(stacks) + more


def _views(group):
    """(name, first member, count) of the group, its spans and its members."""
    yield group.name, 0, len(group.members)
    yield from group.spans
    yield from ((name, k, 1) for k, (name, _) in enumerate(group.members))


def _in_place_function(statement):
    value = getattr(statement, "value", None)
    if isinstance(statement, Assign) and isinstance(value, Apply) and value.arg == statement.target:
        return value.function
    return None


def _halvable(statement, inside, spans):
    """statement is S = sigmoid(S) on a span S that no other loop statement writes, but its group's product."""
    if _in_place_function(statement) != "sigmoid" or statement.target.name not in spans:
        return False
    group, first, count = spans[statement.target.name]
    for other in inside:
        place = spans.get(getattr(getattr(other, "target", None), "name", None))
        if other is statement or place is None or place[0] is not group or other.target.name == group.name:
            continue
        if place[1] < first + count and first < place[1] + place[2]:
            return False
    return True


def _halved_stack(stack, rows):
    """A new stack: the parts at the given indices halved."""
    parts = tuple(sp.Rational(1, 2) * part if k in rows else part for k, part in enumerate(stack.parts))
    return Stack(stack.name + "_halved", parts)


def _halve_inputs(inside, hoisted, stacks, groups, halved):
    """The fused products' and the hoisted statements' stacks with the halved members' rows halved."""
    by_name = {stack.name: stack for stack in stacks}
    spans = {name: (group, first, count) for group in groups for name, first, count in _views(group)}
    more = {}

    def rewrite(statement):
        place = spans.get(getattr(getattr(statement, "target", None), "name", None))
        if place is None or place[0].name not in halved:
            return statement
        group, first, count = place
        rows = {k - first for k in halved[group.name] if first <= k < first + count}
        if not rows:
            return statement
        if count == 1:
            return type(statement)(statement.target, sp.Rational(1, 2) * statement.value, statement.comment)
        swap = {}
        for symbol in sorted(statement.value.atoms(sp.MatrixSymbol), key=sp.default_sort_key):
            if symbol.name in by_name:
                stack = more.setdefault(symbol.name, _halved_stack(by_name[symbol.name], rows))
                swap[symbol] = sp.MatrixSymbol(stack.name, *symbol.shape)
        return type(statement)(statement.target, statement.value.xreplace(swap), statement.comment)

    inside = [rewrite(s) if isinstance(s, Accumulate) else s for s in inside]  # the fused products
    hoisted = [rewrite(s) for s in hoisted]
    return inside, hoisted, list(more.values())
