"""sigmoid(z) = (1 + tanh(z / 2)) / 2 with z / 2 from weights and biases halved once per call: in a
gated cell the gates' sigmoids join the tanh of the candidate in one call (halved_sigmoids)."""

from dataclasses import replace

import sympy as sp

from bptt.codegen.ir import Accumulate, Assign, Loop, Stack, groups_of, rewrite, the_loop, with_body, with_groups
from bptt.codegen.passes.fuse import span_seq, views, with_span
from bptt.derive.atoms import atoms
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import matrix_sum


def halved_sigmoids(program):
    """The Program with its forward loop's gate sigmoids halved: a span's in-place sigmoid joins the tanh of the
    span beside it, before or after (one call for every gate), and is then scaled: 3 calls instead of 5 for an
    LSTM's gates. Only for gates that nothing but the fused product, the hoisted terms and elementwise terms of
    their own (a peephole's p_i * c_{t-1}) write into. A pass of the backends that compute the gates in place."""
    forward = program.forward
    loop = the_loop(forward.statements)
    groups = groups_of(forward)
    spans = {name: (group, first, count) for group in groups for name, first, count in views(group)}
    plan = {k: spans[s.target.name] for k, s in enumerate(loop.body) if _halvable(s, loop.body, spans)} if loop else {}
    if not plan:
        return program
    inside, halved, groups = _halved_loop(list(loop.body), plan, spans, groups)
    return replace(program, forward=_halved_inputs(with_groups(with_body(forward, inside), groups), halved))


def _halved_loop(inside, plan, spans, groups):
    """(the loop's statements with each planned sigmoid a tanh, joined with the tanh beside it, and a scaling;
    {group name: the indices of its halved members}, the groups with the spans the joined tanhs take)."""
    halved, out, skip, by_name = {}, [], set(), {group.name: group for group in groups}
    for index, statement in enumerate(inside):
        if index in skip:
            continue
        if index not in plan:
            out.append(statement)
            continue
        group, first, count = plan[index]
        halved.setdefault(group.name, set()).update(range(first, first + count))
        start, stop, comments = first, first + count, [statement.comment]
        before = _tanh_beside(out[-1] if out else None, spans, group)
        if before and before[1] + before[2] == first:
            start, comments = before[1], [out.pop().comment] + comments
        follow = inside[index + 1] if index + 1 < len(inside) else None
        after = _tanh_beside(follow, spans, group)
        if after and after[1] == stop:
            stop, comments = stop + after[2], comments + [follow.comment]
            skip.add(index + 1)
        wide = statement.target
        if stop - start > count:
            by_name[group.name] = with_span(by_name[group.name], start, stop - start)
            wide = span_seq(group, start, stop - start)
        out.append(Assign(wide, Apply("tanh", wide), "; ".join(comments)))
        half = sp.Rational(1, 2)
        out.append(
            Assign(
                statement.target,
                half * statement.target + half * sp.OneMatrix(*statement.target.shape),
                "(1 + tanh(z / 2)) / 2: the sigmoid",
            )
        )
    return out, halved, list(by_name.values())


def _tanh_beside(statement, spans, group):
    """(group, first, count) of an in-place tanh of a span of the group, or None."""
    place = spans.get(getattr(getattr(statement, "target", None), "name", None))
    return place if _in_place_function(statement) == "tanh" and place and place[0] is group else None


def _in_place_function(statement):
    value = getattr(statement, "value", None)
    if isinstance(statement, Assign) and isinstance(value, Apply) and value.arg == statement.target:
        return value.function
    return None


def _halvable(statement, inside, spans):
    """statement is S = sigmoid(S) on a span S that no other loop statement writes, but its group's product
    and Accumulates into one member of S."""
    if _in_place_function(statement) != "sigmoid" or statement.target.name not in spans:
        return False
    group, first, count = spans[statement.target.name]
    for other in inside:
        place = spans.get(getattr(getattr(other, "target", None), "name", None))
        if other is statement or place is None or place[0] is not group or other.target.name == group.name:
            continue
        own = isinstance(other, Accumulate) and place[2] == 1 and first <= place[1] < first + count
        if not own and place[1] < first + count and first < place[1] + place[2]:
            return False
    return True


def _halved_stack(stack, rows):
    """A new stack: the parts at the given indices halved."""
    parts = tuple(sp.Rational(1, 2) * part if k in rows else part for k, part in enumerate(stack.parts))
    return Stack(stack.name + "_halved", parts)


def _halved_inputs(forward, halved):
    """The forward Pass with the halved members' rows halved in the fused products (and the elementwise terms)
    in the loop and in the hoisted statements, through halved stacks."""
    by_name = {stack.name: stack for stack in forward.stacks}
    spans = {name: (group, first, count) for group in groups_of(forward) for name, first, count in views(group)}
    more = {}

    def halved_rows(statement):
        place = spans.get(getattr(getattr(statement, "target", None), "name", None))
        if place is None or place[0].name not in halved:
            return statement
        group, first, count = place
        rows = {k - first for k in halved[group.name] if first <= k < first + count}
        if not rows:
            return statement
        if count == 1:
            return type(statement)(statement.target, _halved(statement.value, more), statement.comment)
        swap = {}
        for symbol in sorted(atoms(statement.value, sp.MatrixSymbol), key=sp.default_sort_key):
            if symbol.name in by_name:
                stack = more.setdefault(symbol.name, _halved_stack(by_name[symbol.name], rows))
                swap[symbol] = sp.MatrixSymbol(stack.name, *symbol.shape)
        return type(statement)(statement.target, statement.value.xreplace(swap), statement.comment)

    def one(statement):  # in the loop the fused products and the elementwise terms; outside it, the hoisted
        return halved_rows(statement) if isinstance(statement, Accumulate) else statement

    loop = the_loop(forward.statements)
    inside = Loop(rewrite(loop.body, one), loop.backward)
    statements = tuple(inside if s is loop else halved_rows(s) for s in forward.statements)
    return replace(forward, statements=statements, stacks=forward.stacks + tuple(more.values()))


def _halved(value, more):
    """value / 2: in each term p * v of a parameter vector p, p / 2 stacked once per call (more: the stacks
    made, by name); other terms times 1/2."""
    terms = []
    for term in value.args if isinstance(value, sp.MatAdd) else (value,):
        factors = term.args if isinstance(term, sp.HadamardProduct) else ()
        vector = next((f for f in factors if isinstance(f, sp.MatrixSymbol) and f.shape[1] == 1), None)
        if vector is None:
            terms.append(sp.Rational(1, 2) * term)
            continue
        stack = more.setdefault(vector.name, Stack(f"_{vector.name}_halved", (sp.Rational(1, 2) * vector,)))
        terms.append(term.xreplace({vector: sp.MatrixSymbol(stack.name, *vector.shape)}))
    return matrix_sum(terms)
