"""Name the adjoint of a pre-activation that the model does not name.

A cell written f_t = sigmoid(W_f h_{t-1} + U_f x_t + b_f) has no f_bar_t: every use of dL/df_t,
in the next step's flow and in the parameter gradients, reads diag(sigma'(f_t)) dL/df_t. Naming
that product once per step (dL/d_pre_f_t), as the zoo's LSTM names dL/df_bar_t, computes it once
and lets the gates' flows and gradients fuse as the zoo's do (fuse_backward.py).
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.ir import Assign, Loop, rewrite, spliced, the_loop, walk
from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj, Diag, SeqAt, t
from bptt.derive.text import text


def named_slopes(program):
    """The Program with every such product named in its adjoints, dL/dS_0 and returns: an adjoint qualifies
    when it is assigned in the loop and read at least twice, always right after the same diag factor. The
    adjoints that read a recurrent one (a named slope of one) are recurrent too."""
    statements, initial, returns = _named(program.adjoints.statements, program.initial, program.returns)
    return replace(
        program,
        adjoints=replace(program.adjoints, statements=tuple(statements)),
        initial=tuple(initial),
        returns=tuple(returns),
        recurrent=tuple(sorted(_recurrent(statements, program.recurrent))),
    )


def _named(statements, initial, returns):
    """(statements, initial, returns) with every qualifying product named."""
    loop = the_loop(statements)
    if loop is None:
        return statements, initial, returns
    values = [s.value for s in walk(statements) if hasattr(s, "value")] + [i.value for i in initial]
    values += [value for _, value, _ in returns]
    for statement in loop.body:
        target = getattr(statement, "target", None)
        if not (isinstance(statement, Assign) and isinstance(target, Adj) and target.of.role == "intermediate"):
            continue
        slope = _common_slope(values, target.of.name)
        if slope is None:
            continue
        seq = target.of
        named = SeqAt(f"_pre_{seq.name}", t, seq.rows, "intermediate")
        rename = _renamer(seq.name, slope, named)
        values = [rename(value) for value in values]
        statements = rewrite(statements, lambda s, rename=rename: _renamed(s, rename))
        body = list(the_loop(statements).body)
        comment = f"dL/d(pre-activation of {seq.name})_t = {text(Diag(slope) * target)}"
        # a slope named before may have renamed this statement's value: find it by its target
        at = next(k for k, item in enumerate(body) if isinstance(item, Assign) and item.target == target)
        body.insert(at + 1, Assign(Adj(named), Diag(slope) * target, comment))
        statements = spliced(statements, the_loop(statements), [Loop(tuple(body), True)])
        initial = [type(i)(i.key, rename(i.value), i.weighted, i.comment) for i in initial]
        returns = [(key, rename(value), comment) for key, value, comment in returns]
    return statements, initial, returns


def _recurrent(statements, recurrent):
    """The recurrent adjoints, with those that read one (a named slope of a recurrent one)."""
    recurrent = set(recurrent)
    for statement in walk(statements):
        if (
            isinstance(getattr(statement, "target", None), Adj)
            and {a.of.name for a in atoms(statement.value, Adj)} & recurrent
        ):
            recurrent.add(statement.target.of.name)
    return recurrent


def _reads(expr, name):
    """(factors, position) of every product that reads dL/dX (X = name), and how many reads there are."""
    found, total = [], 0
    if not any(a.of.name == name for a in atoms(expr, Adj)):
        return found, total  # (most values read no dL/dX: not walked)
    for node in sp.preorder_traversal(expr):
        if isinstance(node, Adj) and node.of.name == name:
            total += 1
        if isinstance(node, sp.MatMul):
            factors = node.as_coeff_matrices()[1]
            found += [(factors, k) for k, f in enumerate(factors) if isinstance(f, Adj) and f.of.name == name]
    return found, total


def _common_slope(values, name):
    """v_t if every read of dL/dX_tau, two or more, comes right after diag(v_tau); else None."""
    reads = []
    for value in values:
        found, total = _reads(value, name)
        if len(found) != total or any(k == 0 or not isinstance(factors[k - 1], Diag) for factors, k in found):
            return None
        reads += [(factors[k - 1].vector, factors[k].of.time) for factors, k in found]
    general = [(vector, time) for vector, time in reads if time.has(t)]
    if len(reads) < 2 or not general:
        return None
    vector, time = general[0]
    slope = vector.subs(t, 2 * t - time)  # the read at time t + s: its vector at t
    return slope if all(vector == slope.subs(t, time) for vector, time in reads) else None


def _renamer(name, slope, named):
    """diag(v_tau) dL/dX_tau -> dL/d_pre_X_tau, wherever it is read."""

    def swap(node):
        coeff, factors = node.as_coeff_matrices()
        out, k = [], 0
        while k < len(factors):
            f = factors[k]
            nxt = factors[k + 1] if k + 1 < len(factors) else None
            if isinstance(f, Diag) and isinstance(nxt, Adj) and nxt.of.name == name:
                shift = nxt.of.time - t
                if f.vector == slope.subs(t, t + shift):
                    out.append(Adj(named.subs(t, t + shift)))
                    k += 2
                    continue
            out.append(f)
            k += 1
        return sp.MatMul(coeff, *out).doit(deep=False)

    swapped = {}  # product -> its swap: the values share their products

    def swap_once(node):
        if node not in swapped:
            swapped[node] = swap(node)
        return swapped[node]

    def rename(expr):
        if not any(a.of.name == name for a in atoms(expr, Adj)):
            return expr  # (replace would rebuild each product as it is)
        return expr.replace(lambda e: isinstance(e, sp.MatMul), swap_once)

    return rename


def _renamed(statement, rename):
    if hasattr(statement, "value"):
        return type(statement)(statement.target, rename(statement.value), statement.comment)
    return statement
