"""Work that reads nothing of the loop leaves it, computed for all steps at once before it.

Forward: the terms of a loop statement that read nothing computed in the loop are computed before it, into the
target's own array. Backward: products of diag factors that read no adjoint (the slopes of the activations,
1 - h_t^2, sigma'(f_t) c_{t-1}) become arrays computed before the loop.
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.ir import PARAMETER, Array, Assign, Loop, Stack, members_of, rewrite, spliced, the_loop
from bptt.codegen.passes.fuse import sum_terms
from bptt.codegen.passes.loops import loop_names
from bptt.derive.atoms import atoms
from bptt.derive.blocks import Placed
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import Adj, Diag, SeqAt, matrix_sum, t, time_shift
from bptt.derive.text import text


def hoisted_terms(program):
    """The Program with each forward loop statement's sum (or the sum inside its elementwise function) split
    into the terms that read no loop value, computed for all steps before the loop into the target, and the
    rest. A group member always hoists (the fused product is added to what its array holds)."""
    forward = program.forward
    loop = the_loop(forward.statements)
    if loop is None:
        return program
    members = members_of(forward)
    before, inside = _hoist(loop.body, loop_names(program), members)
    before, stacks = _summed_vectors(before, members)
    statements = spliced(forward.statements, loop, before + ([Loop(tuple(inside))] if inside else []))
    return replace(program, forward=replace(forward, statements=statements, stacks=forward.stacks + stacks))


def _summed_vectors(before, members):
    """(the hoisted statements, the Stacks they read): the parameter vectors of a hoisted sum (a norm's bias and
    the gate's, Ba et al.'s b + beta_1 + beta_2) summed once per call, not added to every step one by one. A gate
    of a group is left to stacked_inputs (fuse.py), which sums its biases."""
    out, stacks = [], ()
    for statement in before:
        terms = sum_terms(statement.value)[1]
        vectors = [term for term in terms if isinstance(term, PARAMETER) and term.shape[1] == 1]
        if len(vectors) < 2 or statement.target.name in members:
            out.append(statement)
            continue
        stacks += (Stack(f"_b_{statement.target.name}", (matrix_sum(vectors),)),)
        summed = sp.MatrixSymbol(stacks[-1].name, statement.target.rows, 1)
        rest = [term for term in terms if term not in vectors]
        out.append(replace(statement, value=matrix_sum([summed, *rest])))
    return out, stacks


def _hoist(statements, loop_names, members):
    """Split each loop statement's sum (or the sum inside its elementwise function) into the terms that
    read no loop value, computed for all steps before the loop into the target, and the rest.
    Returns (statements before the loop, statements in it)."""
    before, inside = [], []
    for statement in statements:
        if not isinstance(statement, Assign) or not isinstance(statement.target, SeqAt):
            inside.append(statement)
            continue
        target = statement.target
        rebuild, terms = sum_terms(statement.value)
        fixed = [term for term in terms if not {r.name for r in atoms(term, SeqAt)} & loop_names]
        moving = [term for term in terms if term not in fixed]
        if target.name in members or (moving and any(atoms(term, SeqAt) for term in fixed)):
            fixed = [term for term in fixed if not term.is_ZeroMatrix]
            shown = text(matrix_sum(fixed)) if fixed else "0"
            before.append(Assign(target, matrix_sum(fixed, target.rows), f"{shown}, all steps at once"))
            value = rebuild(matrix_sum([target] + moving))
            if value != target:
                inside.append(Assign(target, value, statement.comment))
        else:
            inside.append(statement)
    return before, inside


def hoisted_factors(program):
    """The Program with the diag factors of its backward loop's terms that are not a stored value computed for
    all steps before the loop (arrays _k1, _k2, ...; an elementwise function two of them read, _f1, ...)."""
    return _with_factors(program, ("_k", "_f"))


def hoisted_slopes(program):
    """The Program with the slopes that collapsed_chains summed hoisted as hoisted_factors hoists (_a1, _g1...)."""
    return _with_factors(program, ("_a", "_g"))


def hoisted_block_slopes(program):
    """The Program with the diag factors inside the blocks of a slice's adjoint (blocks.Placed: the LayerNorm-LSTM's
    dL/da_t from its gates', (1 - f_t) * c_{t-1} * f_t, ...) hoisted as hoisted_factors hoists (_b1, _e1, ...)."""
    return _with_factors(program, ("_b", "_e"), blocks=True)


def _with_factors(program, names, blocks=False):
    statements, factors = _hoist_factors(program.adjoints.statements, names, blocks)
    adjoints = program.adjoints
    return replace(
        program, adjoints=replace(adjoints, statements=tuple(statements), arrays=adjoints.arrays + tuple(factors))
    )


def _hoist_factors(statements, names, blocks=False):
    """The diag factors of the loop's terms that are not a stored value (1 - h_t^2, sigma'(f_t) c_{t-1})
    become arrays computed for all steps before the loop; neighbouring diag factors merge first.
    names: the prefixes of the factors' arrays and of the functions they share; blocks: inside Placed blocks too.
    Returns (statements, the factor arrays)."""
    factors = {}

    def hoisted(statement):
        terms = statement.value.args if isinstance(statement.value, sp.MatAdd) else (statement.value,)
        return replace(statement, value=matrix_sum([_hoisted(term, factors, names[0], blocks) for term in terms]))

    loop = the_loop(statements)
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
    return spliced(statements, loop, before + [Loop(body, True)]), arrays


def _hoisted(term, factors, prefix, blocks=False):
    if isinstance(term, Placed) and blocks:  # a slice's adjoint in its rows of the vector's: its own factors
        return Placed(_hoisted(term.value, factors, prefix), term.block)
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
        if vector is not None and not isinstance(vector, SeqAt) and atoms(vector, SeqAt) and not atoms(vector, Adj):
            # Stored at the latest step it reads, so that 1 - r_{t+1} and 1 - r_t are one array; a factor
            # that reads only t-1 stays at t: the arrays hold steps 1..T, and step 0 is never computed.
            shift = max(0, *(time_shift(r.time) for r in atoms(factor.vector, SeqAt)))
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
