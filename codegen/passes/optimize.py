"""Rewrites of the statements that make the generated passes fast and lean.

Forward: an intermediate that backward does not read, and that one later
assignment reads once, is computed in its reader's place (no array of its own);
the terms of a loop statement that read nothing computed in the loop are
computed for all steps before it, into the target's own array.
Backward: an intermediate's adjoint read once, in its own step, is substituted
into its reader; products of diag factors that read no adjoint (the slopes of
the activations) are computed for all steps before the loop.
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Array, Assign, Loop, Pass, rewrite, walk
from bptt.codegen.passes import fuse_backward
from bptt.codegen.passes.collapse import collapse
from bptt.codegen.passes.fuse import sum_terms
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import Adj, Diag, SeqAt, matrix_sum, t
from bptt.derive.text import text


def value_reads(expr, name):
    """How many times expr reads the sequence value `name`."""
    return sum(1 for node in sp.preorder_traversal(expr) if isinstance(node, SeqAt) and node.name == name)


def adjoint_reads(expr, name):
    """How many times expr reads the adjoint of `name`."""
    return sum(1 for node in sp.preorder_traversal(expr) if isinstance(node, Adj) and node.of.name == name)


def inline_values(steps, cached):
    """steps: [(Seq, rhs, comment)]. Substitute each intermediate that is not cached and that
    exactly one other assignment reads, once, into that assignment."""
    steps = list(steps)
    changed = True
    while changed:
        changed = False
        for k, (seq, rhs, comment) in enumerate(steps):
            if seq.role != "intermediate" or seq.name in cached:
                continue
            counts = [value_reads(other, seq.name) if j != k else 0 for j, (_, other, _) in enumerate(steps)]
            if sum(counts) == 1:
                j = counts.index(1)
                target, value, reader = steps[j]
                steps[j] = (target, value.xreplace({seq(): rhs}), f"{comment}; {reader}")
                del steps[k]
                changed = True
                break
    return steps


def hoist(statements, loop_names, members):
    """Split each loop statement's sum (or the sum inside its elementwise function) into the terms that
    read no loop value, computed for all steps before the loop into the target, and the rest.
    A group member always hoists (the fused product is added to what its array holds).
    Returns (statements before the loop, statements in it)."""
    before, inside = [], []
    for statement in statements:
        if not isinstance(statement, Assign) or not isinstance(statement.target, SeqAt):
            inside.append(statement)
            continue
        target = statement.target
        rebuild, terms = sum_terms(statement.value)
        fixed = [term for term in terms if not {r.name for r in term.atoms(SeqAt)} & loop_names]
        moving = [term for term in terms if term not in fixed]
        if target.name in members or (moving and any(term.atoms(SeqAt) for term in fixed)):
            fixed = [term for term in fixed if not term.is_ZeroMatrix]
            shown = text(matrix_sum(fixed)) if fixed else "0"
            before.append(Assign(target, matrix_sum(fixed, target.rows), f"{shown}, all steps at once"))
            value = rebuild(matrix_sum([target] + moving))
            if value != target:
                inside.append(Assign(target, value, statement.comment))
        else:
            inside.append(statement)
    return before, inside


def backward(statements, initial, returns, stacks):
    """The fast adjoint pass from the plain one: (Pass of the adjoints, initial gradients,
    Pass of the stacked gradient products, the gradients to return)."""

    statements = inline_adjoints(statements, initial, returns)
    statements, initial, groups, used = fuse_backward.flows(statements, initial, stacks)
    gradients, returns, groups = fuse_backward.gradients(returns, groups)
    statements, factors = hoist_factors(statements)
    grouped = {name for group in groups for name, _ in group.members}
    others = [i.value for i in initial] + [v for _, v, _ in returns] + [g.value for g in gradients]
    statements = collapse(statements, others, grouped)
    statements, more = hoist_factors(statements, names=("_a", "_g"))  # the slopes that collapse summed
    factors += more
    targets = [s.target.of for s in walk(statements) if isinstance(getattr(s, "target", None), Adj)]
    shared = share_storage(statements, others, grouped)
    arrays = {
        adjoint_array(seq.name): Array(adjoint_array(seq.name), seq.rows)
        for seq in dict.fromkeys(targets)
        if adjoint_array(seq.name) not in grouped and seq.name not in shared
    }
    for name, onto in shared.items():
        array = arrays[adjoint_array(onto.name)]
        member = (adjoint_array(name), array.rows)
        arrays[array.name] = Array(array.name, array.rows, array.steps, array.members + (member,))
    return (
        Pass(tuple(statements), tuple(groups + list(arrays.values()) + factors), tuple(used)),
        initial,
        Pass(tuple(gradients)),
        returns,
    )


def share_storage(statements, others, grouped):
    """{X: Y} for each adjoint dL/dX_t = diag(...) dL/dY_t computed where nothing reads dL/dY_t after it:
    dL/dX takes dL/dY's array (its array is a view of dL/dY's), computed in place."""
    loop = next((s for s in statements if isinstance(s, Loop)), None)
    values = [s.value for s in walk(statements) if hasattr(s, "value")] + list(others)
    shared = {}
    for statement in loop.body if loop else ():
        if not (isinstance(statement, Assign) and isinstance(statement.target, Adj)):
            continue
        coeff, factors = statement.value.as_coeff_matrices() if isinstance(statement.value, sp.MatMul) else (1, [])
        read = factors[-1] if factors else None
        elementwise = factors and all(isinstance(f, Diag) for f in factors[:-1]) and isinstance(read, Adj)
        if not elementwise or read.of.time != t or read.of.rows != statement.target.of.rows:
            continue
        name, onto = statement.target.of.name, read.of
        if {adjoint_array(name), adjoint_array(onto.name)} & grouped or onto.name in shared:
            continue
        if sum(adjoint_reads(value, onto.name) for value in values) == 1:
            shared[name] = onto
    return shared


def inline_adjoints(statements, initial, returns):
    """Substitute each intermediate adjoint that is a single term assigned in the loop, and that one
    statement of its own step reads once, into that statement."""
    others = [i.value for i in initial] + [value for _, value, _ in returns]
    while True:
        loop = next((s for s in statements if isinstance(s, Loop)), None)
        found = _inlinable(statements, loop, others) if loop else None
        if found is None:
            return statements
        statement, reader = found
        inlined = replace(
            reader,
            value=_flat(reader.value.xreplace({statement.target: statement.value})),
            comment=f"{statement.comment}; {reader.comment}",
        )
        body = tuple(inlined if s is reader else s for s in loop.body if s is not statement)
        statements = [Loop(body, True) if s is loop else s for s in statements]


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
            and statement.target in reader.value.atoms(Adj)
        ):
            return statement, reader
    return None


def _flat(expr):
    """Nested products flattened: diag(u) (diag(v) g) -> diag(u) diag(v) g."""
    return expr.replace(lambda e: isinstance(e, sp.MatMul), lambda e: sp.MatMul(*e.args).doit(deep=False))


def hoist_factors(statements, names=("_k", "_f")):
    """The diag factors of the loop's terms that are not a stored value (1 - h_t^2, sigma'(f_t) c_{t-1})
    become arrays computed for all steps before the loop; neighbouring diag factors merge first.
    names: the prefixes of the factors' arrays and of the functions they share.
    Returns (statements, the factor arrays)."""
    factors = {}

    def hoisted(statement):
        terms = statement.value.args if isinstance(statement.value, sp.MatAdd) else (statement.value,)
        return replace(statement, value=matrix_sum([_hoisted(term, factors, names[0]) for term in terms]))

    loop = next((s for s in statements if isinstance(s, Loop)), None)
    if loop is None:
        return statements, []
    body = rewrite(loop.body, hoisted)
    shared = _shared_functions(factors, names[1])
    before = [Assign(seq(t), value, f"{text(value)}, all steps at once") for value, seq in shared.items()]
    before += [
        Assign(seq(t), value.xreplace({v: k(t) for v, k in shared.items()}), f"{text(value)}, all steps at once")
        for value, seq in factors.items()
    ]
    arrays = [Array(seq.name, seq.rows) for seq in list(shared.values()) + list(factors.values())]
    out = []
    for statement in statements:
        out += before + [Loop(body, True)] if statement is loop else [statement]
    return out, arrays


def _hoisted(term, factors, prefix):
    if not isinstance(term, sp.MatMul):
        return term
    coeff, items = term.as_coeff_matrices()
    merged = []
    for factor in items:
        if isinstance(factor, Diag) and merged and isinstance(merged[-1], Diag):
            merged[-1] = Diag(sp.HadamardProduct(merged[-1].vector, factor.vector).doit(deep=False))
        else:
            merged.append(factor)
    out = []
    for factor in merged:
        vector = factor.vector if isinstance(factor, Diag) else None
        if vector is not None and not isinstance(vector, SeqAt) and vector.atoms(SeqAt) and not vector.atoms(Adj):
            # Stored at the latest step it reads, so that 1 - r_{t+1} and 1 - r_t are one array; a factor
            # that reads only t-1 stays at t: the arrays hold steps 1..T, and step 0 is never computed.
            shift = max(0, *(sp.simplify(r.time - t) for r in factor.vector.atoms(SeqAt)))
            value = factor.vector.subs(t, t - shift)
            if value not in factors:
                factors[value] = _Factor(f"{prefix}{len(factors) + 1}", value.shape[0])
            factor = Diag(factors[value](t + shift))
        out.append(factor)
    return sp.MatMul(coeff, *out).doit(deep=False)


def _shared_functions(factors, prefix):
    """{f(v): its own factor} for each elementwise function value that two factors read (tanh(c_t) in an
    LSTM's two slopes): computed once, for all steps."""
    counts = {}
    for value in factors:
        for node in {n for n in sp.preorder_traversal(value) if isinstance(n, Apply)}:
            counts[node] = counts.get(node, 0) + 1
    shared = [node for node in sorted(counts, key=sp.default_sort_key) if counts[node] > 1 and node not in factors]
    return {node: _Factor(f"{prefix}{k + 1}", node.shape[0]) for k, node in enumerate(shared)}


class _Factor:
    """A hoisted factor's sequence: name and rows."""

    def __init__(self, name, rows):
        self.name, self.rows = name, rows

    def __call__(self, time=t):
        return SeqAt(self.name, time, self.rows, "intermediate")
