"""A model with reverse-time states as forward-only models, one per group of steps, which the generated code runs
one after the other (forward, then backward in reverse order).

The groups refine derive/direction.py's sweeps: a sweep's steps that depend on each other across steps (a state,
the intermediates of its own recursion) stay together, the others part (a layer's reverse chain, then the chain
of the layer above reading it), so that each group hands one value to the groups after it. A reverse group's
steps are written forward in time (a read at t+1 becomes a read at t-1): it runs forward over the
time-reversed steps. A group's one input stacks what it reads at t and does not assign: the model's input (if it
reads it), then the values of earlier groups (its side reads), each read as its rows of that stack. A group
before the last has one output, the value later groups read (identity), and a squared error no one calls; the
last carries the model's outputs and loss. side_gradients gives dL/dv_t of each side read v, which the code
hands back as the d_outputs of the group that computes v.
"""

import functools
from dataclasses import dataclass

import sympy as sp

from bptt.derive.atoms import atoms
from bptt.derive.blocks import split
from bptt.derive.bptt import _Builder
from bptt.derive.direction import REVERSE, sweeps
from bptt.derive.model import Model, Seq, matrix, sizes
from bptt.derive.nodes import SeqAt, SquaredError, equal, matrix_sum, references, t
from bptt.derive.refusal import Refusal

SIDE = "side"  # the prefix of the names a group adds: its stacked input and its size, its output and target


@dataclass(frozen=True)
class SweepModel(Model):
    """One group of steps as a forward-only Model. side: ((Seq, first row), ...) of each side read in its input's
    rows; reverse: it runs over the time-reversed steps; reads_input: its input stacks the model's input first;
    exposes: the values later groups read (Seqs; its output stacks them), () for the last group; placement: the
    parameter that stacks several (identity blocks the runtime gives, its gradient unused), or None."""

    side: tuple = ()
    reverse: bool = False
    reads_input: bool = True
    exposes: tuple = ()
    placement: object = None


@functools.lru_cache(maxsize=64)
def sweep_models(model):
    """The model's groups as SweepModels, in the order they run; a Refusal if one cannot be coded yet."""
    groups = _groups(model)
    (source,) = model.inputs
    owner = {seq.name: n for n, (_, steps) in enumerate(groups) for seq, _ in steps}
    out = []
    for k, (direction, steps) in enumerate(groups):
        later = [rhs for _, group in groups[k + 1 :] for _, rhs in group] + [rhs for _, rhs in model.outputs]
        exposed = sorted({ref.name for rhs in later for ref in references(rhs) if owner.get(ref.name) == k})
        last = k == len(groups) - 1
        exposed = exposed or [next(seq.name for seq, _ in steps if seq.role == "state")]  # read by none: zero
        exposes = () if last else tuple(seq for seq, _ in steps if seq.name in exposed)
        out.append(_sweep_model(model, k, direction == REVERSE, steps, last, exposes, owner, source))
    return tuple(out)


def _groups(model):
    """((direction, steps), ...): each sweep's steps parted into groups that depend on each other across steps,
    a group after those it reads; a group of intermediates that reads no state across steps joins the next group
    (the one before it, at the end)."""
    out = []
    for sweep in sweeps(model):
        names = [seq.name for seq, _ in sweep.steps]
        reads = {seq.name: {r.name for r in references(rhs)} & set(names) for seq, rhs in sweep.steps}
        reach = {name: _reach(name, reads) for name in names}
        group = {name: name for name in names}  # one group: a recursion, and what reads a value of it across steps

        for seq, rhs in sweep.steps:
            across = {r.name for r in references(rhs) if r.time != t and r.name in reach}
            for other in names:
                if other in across or seq.name in reach[other] and other in reach[seq.name]:
                    group[_root(group, other)] = _root(group, seq.name)
        parts = {}
        for step in sweep.steps:
            parts.setdefault(_root(group, step[0].name), []).append(step)
        parts, placed = list(parts.values()), set()
        while parts:  # a part after the parts it reads; parts that read each other at t run as one
            ready = [p for p in parts if all(reads[seq.name] - {s.name for s, _ in p} <= placed for seq, _ in p)]
            part = (
                ready[0] if ready else sorted((step for p in parts for step in p), key=lambda s: names.index(s[0].name))
            )
            parts = [p for p in parts if p is not part] if ready else []
            placed |= {seq.name for seq, _ in part}
            out.append([sweep.direction, sorted(part, key=lambda step: names.index(step[0].name))])
    merged = []
    for direction, steps in out:
        if merged and not _stateful(merged[-1][1]):
            merged[-1] = [direction, merged[-1][1] + steps]
        else:
            merged.append([direction, steps])
    if len(merged) > 1 and not _stateful(merged[-1][1]):
        merged[-2][1] += merged.pop()[1]
    for _, steps in merged:
        mine = {seq.name for seq, _ in steps}
        earlier = sorted({r.name for _, rhs in steps for r in references(rhs) if r.time != t and r.name not in mine})
        if earlier:
            raise Refusal(
                f"the generated code cannot yet run a step that reads {', '.join(earlier)} of another step "
                "(at t-1 or t+1) in another sweep over time"
            )
    return tuple((direction, tuple(steps)) for direction, steps in merged)


def _root(group, name):
    while group[name] != name:
        name = group[name]
    return name


def _stateful(steps):
    return any(seq.role == "state" for seq, _ in steps)


def _reach(name, reads):
    seen, todo = set(), [name]
    while todo:
        for other in reads[todo.pop()] - seen:
            seen.add(other)
            todo.append(other)
    return seen


def _sweep_model(model, k, reverse, steps, last, exposes, owner, source):
    equations = list(steps) + (list(model.outputs) if last else [])
    side = sorted(
        {
            Seq(r.name, r.rows, r.role)
            for _, rhs in equations
            for r in references(rhs)
            if r.time == t and r.name in owner and owner[r.name] < k
        },
        key=lambda seq: seq.name,
    )
    reads_input = not side or any(r.name == source.name for _, rhs in equations for r in references(rhs))
    parts = ([source] if reads_input else []) + side
    if source.role == "label" and len(parts) > 1:
        raise Refusal(f"the generated code cannot stack the labels {source.name} with the values of other steps yet")
    starts = _starts(parts)
    extra_sizes = []
    if len(parts) == 1:
        stacked = parts[0] if parts[0] == source else Seq(f"{SIDE}_{source.name}", parts[0].rows, "input")
    else:
        rows = sizes(f"{SIDE}_rows")
        stacked, extra_sizes = Seq(f"{SIDE}_{source.name}", rows, "input"), [rows]
    rows_of = {seq.name: (start, seq.rows) for seq, start in zip(parts, starts, strict=True)}
    states = {seq.name for seq, _ in steps if seq.role == "state"}

    def rewritten(rhs):
        swap = {}
        for ref in rhs.atoms(SeqAt):
            if ref.name in rows_of and ref.time == t and stacked != source:
                start, count = rows_of[ref.name]
                swap[ref] = stacked() if len(parts) == 1 else stacked()[start : start + count, :]
            elif reverse and ref.name in states and ref.time == t + 1:
                swap[ref] = SeqAt(ref.name, t - 1, ref.rows, ref.role)
        return rhs.xreplace(swap)

    coded = tuple((seq, rewritten(rhs)) for seq, rhs in steps)
    if last:
        outputs = tuple((seq, rewritten(rhs)) for seq, rhs in model.outputs)
        loss, extra = model.loss, dict(mean=model.mean, code_loss=model.code_loss)
    else:
        outputs, loss, extra = _exposing(exposes)
        extra_sizes += [s for s in outputs[0][0].rows.free_symbols if s not in model.sizes]
    used = set().union(*(atoms(rhs, sp.MatrixSymbol) for _, rhs in coded + outputs))
    dims = [*(n for p in used for n in p.shape), stacked.rows, *(seq.rows for seq, _ in coded + outputs)]
    dims += [r.rows for r in loss.atoms(SeqAt)]
    named = set().union(*(sp.sympify(n).free_symbols for n in dims))
    return SweepModel(
        name=f"{model.name}-sweep{k + 1}",
        title=f"{model.title}, sweep {k + 1}",
        source=model.source,
        sizes=tuple(s for s in model.sizes if s in named) + tuple(extra_sizes),
        params=tuple(p for p in model.params if p in used) + ((extra["placement"],) if extra.get("placement") else ()),
        inputs=(stacked,),
        steps=coded,
        outputs=outputs,
        loss=loss,
        side=tuple((seq, start) for seq, start in zip(parts, starts, strict=True) if seq != source),
        reverse=reverse,
        reads_input=reads_input,
        exposes=exposes,
        **extra,
    )


def _exposing(exposes):
    """(outputs, loss, the Model's other fields) of a group before the last: its output the value later groups read,
    or the stack of several, P[:, a:b] v + ... with P a parameter the runtime gives as the identity."""
    if len(exposes) == 1:
        rows, value, placement = exposes[0].rows, exposes[0](), None
    else:
        rows = sizes(f"{SIDE}_out_rows")
        placement = matrix(f"{SIDE}_P", rows, rows)
        value = matrix_sum(
            placement[:, start : start + seq.rows] * seq() for seq, start in zip(exposes, _starts(exposes), strict=True)
        )
    out, target = Seq(f"{SIDE}_out", rows, "output"), Seq(f"{SIDE}_y", rows, "target")
    return ((out, value),), SquaredError(out(), target()), {"placement": placement}


def _starts(seqs):
    out, start = [], sp.S.Zero
    for seq in seqs:
        out.append(start)
        start = start + seq.rows
    return out


def side_gradients(model):
    """[(side Seq, dL/dv_t)] of a SweepModel's side reads: the adjoint of its rows of the stacked input, every
    intermediate's adjoint named (as the generated code's derivation names them)."""
    if not isinstance(model, SweepModel) or not model.side:
        return []
    builder = _Builder(model, frozenset(model.intermediates))
    (stacked,) = model.inputs
    values = [c.value for c in builder.contributions(stacked)]
    if len(model.side) == 1 and not model.reads_input:
        (seq, _), total = model.side[0], matrix_sum(values, stacked.rows) if values else None
        return [(seq, total if total is not None else sp.ZeroMatrix(seq.rows, 1))]
    whole, placed = split(matrix_sum(values)) if values else ([], [])
    out = []
    for seq, start in model.side:
        mine = [p.value for p in placed if equal(p.block.rowslice[0], start)]
        out.append((seq, matrix_sum(mine, seq.rows) if mine else sp.ZeroMatrix(seq.rows, 1)))
    return out
