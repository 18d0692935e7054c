"""The forward-mode (RTRL) gradient as IR statements (ir_tangents.TangentLoop and its parts), from bptt.derive.rtrl.

One loop over time for every gradient: the directions of all gradients that the tangents carry are
stacked on the first axis of each tangent array, (P, B, n). The step's tangents are derived once, along
every direction (derive.rtrl.step_tangents); a tangent's terms through the tangents of the step before it
apply to every direction at once, and each parameter's local term is added into its own rows (ir_tangents.AddAlong).
Every tangent of the step is named, so each statement is one equation of the step. Every backend prints
these statements (printing/tangents.py, torch/rtrl.py, jax/forward_mode.py).
"""

import dataclasses
import functools

import sympy as sp

from bptt.codegen.ir import Assign, Copy
from bptt.codegen.ir_tangents import (
    AddAlong,
    Contract,
    Direction,
    Gradient,
    Previous,
    TangentArray,
    TangentLoop,
    Units,
    ZeroGradient,
)
from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj, SeqAt, t, time_shift
from bptt.derive.rtrl import factored, step_tangents
from bptt.derive.tangent import Tangent
from bptt.derive.text import text


def statements(model):
    """Units for every vector whose directions the loop reads, the TangentLoop, then each gradient in the order
    of the gradients' keys (a ZeroGradient for one that no output depends on)."""
    steps = step_tangents(model, _named_tangents(model))
    directions = [Direction(p.name, p) for p in model.params] + [Direction(f"{s.name}0", s) for s in model.states]
    modes = {d.key: steps.along(d.wrt) for d in directions}
    kept = _needed(steps, modes.values())
    carried = [d for d in directions if _carried(modes[d.key], kept)]
    loose = [d for d in directions if d not in carried and any(modes[d.key].outputs.values())]
    loop = _loop(model, steps, kept, carried + loose, len(carried)) if carried or loose else None
    grads = tuple(
        Gradient(d)
        if d in carried or d in loose
        else ZeroGradient(d.key, d.wrt, f"{d.key}: zero, no output depends on it")
        for d in directions
    )
    loops = (loop,) if loop else ()
    return tuple(Units(rows) for rows in _units_read(loops)) + loops + grads


def _named_tangents(model):
    """Every sequence the step computes: each tangent is then as long as its own equation."""
    return tuple(seq for seq, _ in model.steps if seq not in model.forced)


def _needed(steps, modes):
    """{Seq: the set of its terms not zero along some direction} for the outputs and the named tangents that
    the outputs read, through the tangents they read (at t, and at t - 1 through the steps before)."""
    terms = {seq: set() for seq in (*steps.tangents, *steps.outputs)}
    for mode in modes:
        for seq, along in (*mode.tangents.items(), *mode.outputs.items()):
            terms[seq] |= set(along)
    names = {seq.name: seq for seq in steps.tangents}
    needed, todo = set(), list(steps.outputs)
    while todo:
        seq = todo.pop()
        for term in terms[seq]:
            read = _read(term)
            if isinstance(read, SeqAt) and read.name in names and names[read.name] not in needed:
                needed.add(names[read.name])
                todo.append(names[read.name])
    return {seq: along for seq, along in terms.items() if seq in needed or seq in steps.outputs}


def _carried(mode, kept):
    """Whether a direction's tangents are carried: a needed tangent, or a state's at t - 1, is not zero along it."""
    if any(seq in kept for seq in mode.tangents):
        return True
    return any(isinstance(_read(term), SeqAt) for terms in mode.outputs.values() for term in terms)


def _loop(model, steps, kept, directions, carried):
    """The TangentLoop: the needed terms not zero along some direction, the local ones of each in its rows."""
    by_key = {d.wrt: d for d in directions}
    body = []
    for seq, terms in steps.tangents.items():
        along = [term for term in terms if term in kept.get(seq, ())]
        if along:
            body += _assign(seq, along, by_key)
    output = model.outputs[0][0]
    terms = [term for seq, all_terms in steps.outputs.items() for term in all_terms if term in kept[seq]]
    body += _contract(terms, Adj(output()), by_key)
    read = {_read(term).name for terms in kept.values() for term in terms if _is_previous(_read(term))}
    assigned = {s.target.of.name for s in body if isinstance(s, Assign)}
    states = [s for s in model.states if s.name in read]
    body += [
        Assign(Tangent(s()), sp.ZeroMatrix(s.rows, 1), f"{text(Tangent(s()))} = 0: {s.name}_t is data")
        for s in states
        if s.name not in assigned
    ]
    own = {d.wrt.name: d for d in directions[:carried] if d.per_sample}
    arrays = tuple(TangentArray(s, own.get(s.name)) for s in states)
    previous = tuple(
        Previous(s, f"{text(Tangent(s(t - 1)))}, read after {text(Tangent(s()))}") for s in _reread(body, states)
    )
    comment = "forward mode: the tangents along the directions of every gradient at once, stacked on a first axis"
    return TangentLoop(directions, carried, arrays, previous + tuple(body), comment)


def _assign(seq, terms, by_key):
    """The statements of one named tangent: the terms through other tangents for every direction at once, then
    each parameter's local term into its rows; a left factor common to every term applied last."""
    target = Tangent(seq())
    comment = f"{text(target)} = {text(factored(_local_first(terms)))}"
    through, local = _split(terms, by_key)
    if not local:
        return [Assign(target, factored(through), comment)]
    factor, through, local = _common_factor(through, local)
    if not through:
        first = Assign(target, sp.ZeroMatrix(seq.rows, 1), comment)
    else:
        value = factored(through)
        first = Assign(target, Copy(value) if isinstance(value, Tangent) else value, comment)
    adds = [AddAlong(target, d, factored(terms), text(factored(terms))) for d, terms in local.items()]
    scale = [Assign(target, sp.MatMul(factor, target), "")] if factor is not None else []
    return [first] + adds + scale


def _common_factor(through, local):
    """(F, the terms through other tangents, the local ones) with F pulled out of them all when every term,
    through or local, is a product starting with F (and some term goes through another tangent); F None else."""
    terms = through + [term for group in local.values() for term in group]
    first = terms[0].args[0] if isinstance(terms[0], sp.MatMul) else None
    common = through and first is not None and all(isinstance(x, sp.MatMul) and x.args[0] == first for x in terms)
    if not common:
        return None, through, local
    rest = lambda term: sp.MatMul(*term.args[1:]).doit(deep=False) if len(term.args) > 2 else term.args[1]  # noqa: E731
    return first, [rest(x) for x in through], {d: [rest(x) for x in group] for d, group in local.items()}


def _contract(terms, adjoint, by_key):
    """The output's tangent against dL/do_t: its terms through the tangents for every carried direction, each
    local term into its own rows."""
    through, local = _split(terms, by_key)
    out = [Contract(factored(through), adjoint, None, text(factored(through)))] if through else []
    out += [Contract(factored(group), adjoint, d, text(factored(group))) for d, group in local.items()]
    equation = f"{text(Tangent(adjoint.of))} = {text(factored(_local_first(terms)))}"
    first = f"every gradient += {text(adjoint)}^T {text(Tangent(adjoint.of))}, {equation}"
    return [dataclasses.replace(out[0], heading=first)] + out[1:] if out else []


def _split(terms, by_key):
    """(the terms through other tangents, {Direction: its local terms} in the order of the directions' rows)."""
    through = [term for term in terms if isinstance(_read(term), SeqAt)]
    local = {}
    for term in terms:
        if not isinstance(_read(term), SeqAt):
            local.setdefault(by_key[_read(term)], []).append(term)
    rows = list(by_key.values())
    return through, dict(sorted(local.items(), key=lambda item: rows.index(item[0])))


@functools.lru_cache(maxsize=8192)  # every term is read several times (split, kept, reread)
def _read(term):
    """What the one Tangent of a term is of: a parameter, or a sequence value."""
    (of,) = {d.of for d in atoms(term, Tangent)}
    return of


def _is_previous(node):
    return isinstance(node, SeqAt) and time_shift(node.time) == -1


def _local_first(terms):
    return [x for x in terms if not isinstance(_read(x), SeqAt)] + [x for x in terms if isinstance(_read(x), SeqAt)]


def _reread(body, states):
    """The states whose tangent at t - 1 the step reads after assigning theirs at t, in the step's order."""
    names = {s.name for s in states}
    assigned, reread = set(), []
    for statement in body:
        value = statement.tangent if isinstance(statement, Contract) else statement.value
        reads = {d.of.name for d in atoms(value, Tangent) if _is_previous(d.of)}
        reread += [s for s in states if s.name in reads & assigned and s not in reread]
        if isinstance(statement, Assign) and statement.target.of.name in names:
            assigned.add(statement.target.of.name)
    return reread


def _units_read(loops):
    """The rows of every vector whose directions the loops read, in the order they are first read: the tangent
    of a vector parameter, and of an initial state that starts a tangent."""
    rows = []
    for loop in loops:
        rows += [array.state.rows for array in loop.arrays if array.own is not None]
        for statement in loop.body:
            if isinstance(statement, Previous):
                continue
            expr = statement.tangent if isinstance(statement, Contract) else statement.value
            rows += [d.of.rows for d in sorted(atoms(expr, Tangent), key=str) if _is_vector_parameter(d.of)]
    return list(dict.fromkeys(rows))


def _is_vector_parameter(node):
    return isinstance(node, sp.MatrixSymbol) and node.shape[1] == 1
