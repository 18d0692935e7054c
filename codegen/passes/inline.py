"""What forward stores, and the values and adjoints that need no array of their own.

Forward: an intermediate that backward does not read, and that one later assignment reads once, is computed
in its reader's place. Backward: an intermediate's adjoint read once, in its own step, is substituted into
its reader.
"""

import collections
import functools
from dataclasses import replace

import sympy as sp

from bptt.codegen.ir import Assign, Loop, spliced, the_loop, walk, with_body
from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj, SeqAt, values
from bptt.derive.norm_adjoint import NormAdjoint
from bptt.derive.rows import rows_of


def _value_reads(expr, name):
    """How many times expr reads the sequence value `name`."""
    return sum(1 for node in sp.preorder_traversal(expr) if isinstance(node, SeqAt) and node.name == name)


def adjoint_reads(expr, name):
    """How many times expr reads the adjoint of `name` (a norm's adjoint reads its vector more than once)."""
    return _adjoint_reads(expr).get(name, 0)


@functools.lru_cache(maxsize=4096)  # asked of every statement for each adjoint, and again after each inlining
def _adjoint_reads(expr):
    """{name: how many times expr reads the adjoint of name}, read in one walk of expr."""
    reads, norms = collections.Counter(), set()
    for node in sp.preorder_traversal(expr):
        if isinstance(node, Adj):
            reads[node.of.name] += 1
        elif isinstance(node, NormAdjoint):
            norms.add(node)
    for norm in norms:
        for name, count in _adjoint_reads(norm.g).items():
            reads[name] += norm.rereads * count
    return dict(reads)


def read_after(program):
    """The values the backward pass's caller reads after its loop: dL/dS_0, the returns, the gradient products."""
    values = [i.value for i in program.initial] + [value for _, value, _ in program.returns]
    return values + [g.value for g in program.gradients.statements]


def cached_values(program):
    """The Program whose cache holds what forward keeps for backward: the input, then the states and the
    intermediates whose values the adjoints, dL/dS_0 or the gradients read, in the model's order."""
    model = program.model
    read = {s.name for s in model.states}
    expressions = [getattr(s, "value", sp.S.Zero) for s in walk(program.adjoints.statements)]
    expressions += [i.value for i in program.initial] + [value for _, value, _ in program.returns]
    for expr in expressions:
        read |= {seq.name for seq in values(expr)}
    cached = tuple(seq.name for seq in model.states + model.intermediates if seq.name in read)
    return replace(program, cache=(model.inputs[0].name, *cached))


def inlined_values(program):
    """The Program with each intermediate of the forward loop that is not cached and that exactly one other
    statement there reads, once, substituted into that statement (and its array gone)."""
    forward = program.forward
    loop = the_loop(forward.statements)
    cached = program.cache[1:]
    steps, gone = list(loop.body), set()
    changed = True
    while changed:
        changed = False
        for k, statement in enumerate(steps):
            seq = statement.target
            if seq.role != "intermediate" or seq.name in cached:
                continue
            counts = [_value_reads(other.value, seq.name) if j != k else 0 for j, other in enumerate(steps)]
            if sum(counts) == 1:
                j = counts.index(1)
                reader = steps[j]
                value = _substituted(reader.value, seq, statement.value)
                steps[j] = replace(reader, value=value, comment=f"{statement.comment}; {reader.comment}")
                del steps[k]
                gone.add(seq.name)
                changed = True
                break
    arrays = tuple(array for array in forward.arrays if array.name not in gone)
    return replace(program, forward=replace(with_body(forward, steps), arrays=arrays))


def _substituted(expr, seq, value):
    """expr with value in place of seq(t); a slice seq(t)[a:b, :] as the rows a:b of value, the slice on its leaves
    (derive/rows.py: (W x_t + U h_{t-1})[a:b] is W[a:b, :] x_t + U[a:b, :] h_{t-1}), which the printers index."""
    slices = {
        node: rows_of(value, *node.rowslice[:2])
        for node in sp.preorder_traversal(expr)
        if isinstance(node, sp.MatrixSlice) and node.parent == seq
    }
    return expr.xreplace({**slices, seq: value})


def inlined_adjoints(program):
    """The Program with each intermediate adjoint that is a single term assigned in the backward loop, and that
    one statement of its own step reads once, substituted into that statement."""
    statements, others = program.adjoints.statements, read_after(program)
    while True:
        loop = the_loop(statements)
        found = _inlinable(statements, loop, others) if loop else None
        if found is None:
            return replace(program, adjoints=replace(program.adjoints, statements=tuple(statements)))
        statement, reader = found
        inlined = replace(
            reader,
            value=_flat(reader.value.xreplace({statement.target: statement.value})),
            comment=f"{statement.comment}; {reader.comment}",
        )
        body = tuple(inlined if s is reader else s for s in loop.body if s is not statement)
        statements = spliced(statements, loop, [Loop(body, True)])


def _inlinable(statements, loop, others):
    """(statement, its reader) for the first adjoint that can be inlined, or None."""
    for statement in loop.body:
        if not (isinstance(statement, Assign) and isinstance(statement.target, Adj)):
            continue
        seq = statement.target.of
        if seq.role != "intermediate" or isinstance(statement.value, sp.MatAdd):
            continue
        writes = [
            s for s in walk(statements) if isinstance(getattr(s, "target", None), Adj) and s.target.of.name == seq.name
        ]
        readers = [s for s in walk(statements) if hasattr(s, "value") and adjoint_reads(s.value, seq.name)]
        if len(writes) != 1 or len(readers) != 1 or any(adjoint_reads(value, seq.name) for value in others):
            continue
        reader = readers[0]
        if (
            reader in loop.body
            and adjoint_reads(reader.value, seq.name) == 1
            and statement.target in atoms(reader.value, Adj)
        ):
            return statement, reader
    return None


def _flat(expr):
    """Nested products flattened: diag(u) (diag(v) g) -> diag(u) diag(v) g."""
    return expr.replace(lambda e: isinstance(e, sp.MatMul), lambda e: sp.MatMul(*e.args).doit(deep=False))
