"""Fewer products per step in the backward loop: chains of diag factors through one adjoint collapse.

An adjoint that the loop assigns as a chain of diag factors of another one, dL/dY_t = diag(a_t) dL/dX_t
(a gate's pre-activation: diag(sigma'(o_t)) dL/dh_t), can be read through X: diag(b) dL/dY_t is
diag(b * a_t) dL/dX_t, and hoist.py's hoisted_slopes computes b * a_t for all steps before the loop. Two ways that
saves calls at every step:

- terms that then read the same adjoint add up in one slope: the peephole LSTM's
  diag(p_o) dL/do_bar_t + diag(k_t) dL/dh_t is diag(p_o * a_t + k_t) dL/dh_t, one product for three calls;
- an adjoint that the loop reads only through such chains leaves the loop: it is computed after it, for
  all steps at once (the GRU's dL/dn_bar_t, which only the gradients of W_in and b_in need).
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Assign, Loop, members_of, rewrite, spliced, the_loop, walk
from bptt.codegen.passes.inline import read_after
from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj, Diag, matrix_sum, t
from bptt.derive.text import text


def collapsed_chains(program):
    """The Program with its backward loop's diag chains collapsed (_collapse)."""
    adjoints = program.adjoints
    statements = _collapse(adjoints.statements, read_after(program), members_of(adjoints))
    return replace(program, adjoints=replace(adjoints, statements=tuple(statements)))


def _collapse(statements, others, grouped):
    """statements with the backward loop's diag chains collapsed; others: the values read after the loop
    (initial gradients, returns, gradient products), which may still read any adjoint; grouped: the arrays of
    the adjoints that are members of a group (read with the group's other members: they stay in the loop)."""
    loop = the_loop(statements)
    if loop is None:
        return statements
    definitions = _definitions(loop.body, statements)
    body, after = list(rewrite(loop.body, lambda s: _collected(s, definitions))), []
    for name in list(_definitions(body, statements)):
        definitions = _definitions(body, statements)
        if name not in definitions or adjoint_array(name) in grouped or not _only_chains(body, name):
            continue
        own, chain = definitions[name]
        kept = [s for s in body if s is not own]
        body = list(rewrite(kept, lambda s, name=name, chain=chain: _substituted(s, name, chain)))
        if any(_reads(value, name) for value in others):
            after.append(replace(own, comment=f"{own.comment}, all steps at once"))
    definitions = _definitions(body, statements)
    body = list(rewrite(body, lambda s: _collected(s, definitions)))
    return spliced(statements, loop, [Loop(tuple(body), loop.backward)] + after)


def _chain(value):
    """(coeff, [a_1, ..., a_k], dL/dX) if value is coeff diag(a_1) ... diag(a_k) dL/dX, else None."""
    if isinstance(value, Adj):
        return sp.S.One, [], value
    if isinstance(value, sp.MatMul):
        coeff, factors = value.as_coeff_matrices()
        if isinstance(factors[-1], Adj) and all(isinstance(f, Diag) for f in factors[:-1]):
            return coeff, [f.vector for f in factors[:-1]], factors[-1]
    return None


def _definitions(body, statements):
    """{Y: (its statement, chain)} for each adjoint the loop assigns once as a chain through another adjoint
    at the same step, that nothing writes after it in the step, and that no other statement writes."""
    writes = {}
    for statement in walk(statements):
        target = getattr(statement, "target", None)
        if isinstance(target, Adj):
            writes[target.of.name] = writes.get(target.of.name, 0) + 1
    out = {}
    for k, statement in enumerate(body):
        if not (isinstance(statement, Assign) and isinstance(statement.target, Adj)):
            continue
        chain = _chain(statement.value)
        name = statement.target.of.name
        if chain is None or not chain[1] or writes[name] != 1:
            continue
        read = chain[2].of
        later = {getattr(s, "target", None) for s in walk(body[k + 1 :])}
        if read.time == t and read.name != name and not any(_writes(x, read.name) for x in later):
            out[name] = (statement, chain)
    return out


def _writes(target, name):
    return isinstance(target, Adj) and target.of.name == name


def _reads(value, name):
    return any(node.of.name == name for node in atoms(value, Adj))


def _terms(value):
    return list(value.args) if isinstance(value, sp.MatAdd) else [value]


def _through(term, chains):
    """term's chain, read through the chain of the adjoint it reads if chains has one (shifted to its step)."""
    chain = _chain(term)
    if chain is None or chain[2].of.name not in chains:
        return chain
    coeff, vectors, adjoint = chain
    shift = adjoint.of.time - t
    inner_coeff, inner, read = chains[adjoint.of.name]
    return coeff * inner_coeff, vectors + [v.subs(t, t + shift) for v in inner], read.subs(t, t + shift)


def _slope(chains, rows):
    """The vector of sum_k coeff_k diag(a_k1) ... diag(a_kn): sum_k coeff_k a_k1 * ... * a_kn."""
    parts = []
    for coeff, vectors, _ in chains:
        vector = sp.HadamardProduct(*vectors).doit(deep=False) if len(vectors) > 1 else vectors[0] if vectors else None
        vector = sp.OneMatrix(rows, 1) if vector is None else vector
        parts.append(vector if coeff == 1 else coeff * vector)
    return matrix_sum(parts)


def _collected(statement, definitions):
    """A statement whose terms, read through the definitions, have two or more that read the same adjoint:
    those terms as one diag product. Other terms as they were."""
    if not hasattr(statement, "value"):
        return statement
    terms = _terms(statement.value)
    chains = [_through(term, {name: chain for name, (_, chain) in definitions.items()}) for term in terms]
    by_adjoint = {}
    for term, chain in zip(terms, chains, strict=True):
        if chain is not None:
            by_adjoint.setdefault(chain[2], []).append((term, chain))
    out, done, cancelled = [], set(), set()
    for term, chain in zip(terms, chains, strict=True):
        group = by_adjoint.get(chain[2], []) if chain is not None else []
        if len(group) < 2:
            out.append(term)
        elif chain[2] not in done | cancelled:
            slope = _slope([c for _, c in group], chain[2].shape[0])
            if isinstance(slope, sp.ZeroMatrix):  # terms that cancel: a layer norm's over one unit (I - 1 1^T / 1)
                cancelled.add(chain[2])
            else:
                done.add(chain[2])
                out.append(Diag(slope) * chain[2])
    if len(out) == len(terms):
        return statement
    notes = [f"one slope times {_listed(by_adjoint, done)}"] if done else []
    notes += [f"the terms through {_listed(by_adjoint, cancelled)} cancel"] if cancelled else []
    value = matrix_sum(out, statement.value.shape[0])
    return replace(statement, value=value, comment=f"{statement.comment} ({'; '.join(notes)})")


def _listed(adjoints, chosen):
    return ", ".join(text(adjoint) for adjoint in adjoints if adjoint in chosen)


def _only_chains(body, name):
    """Whether every read of dL/dY (Y = name) in the loop, but its own assignment, is a term that is a chain."""
    for statement in walk(body):
        value = getattr(statement, "value", None)
        if value is None or _writes(statement.target, name):
            continue
        for term in _terms(value):
            chain = _chain(term)
            if _reads(term, name) and (chain is None or chain[2].of.name != name or _reads_inside(chain, name)):
                return False
    return True


def _reads_inside(chain, name):
    """Whether a chain's diag vectors read dL/dY themselves."""
    return any(_reads(vector, name) for vector in chain[1])


def _substituted(statement, name, chain):
    """The statement with each term that reads dL/dY (Y = name) read through Y's chain."""
    if not hasattr(statement, "value"):
        return statement
    terms, read = [], None
    for term in _terms(statement.value):
        found = _chain(term)
        if found is not None and found[2].of.name == name:
            coeff, vectors, read = _through(term, {name: chain})
            term = coeff * sp.MatMul(*[Diag(v) for v in vectors], read).doit(deep=False)
        terms.append(term)
    if read is None:
        return statement
    return replace(statement, value=matrix_sum(terms), comment=f"{statement.comment} (from {text(read)})")
