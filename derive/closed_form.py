"""The closed form of the state-adjoint recursion, derived from the recursion.

dL/dh_t = A_{t+1} dL/dh_{t+1} + b_t with dL/dh_{T+1} = 0 unrolls to
dL/dh_t = sum_{j=t}^{T} (A_{t+1} A_{t+2} ... A_j) b_j, where A_k is the
transposed Jacobian (dh_k/dh_{k-1})^T and b_j the local term. For a linear
cell A_k is constant and the product is the power A^{j-t}.
"""

import functools
from dataclasses import dataclass

import sympy as sp

from bptt.derive.atoms import atoms
from bptt.derive.blocks import Placed
from bptt.derive.bptt import NEXT, SAME
from bptt.derive.nodes import Adj, DescendingTimeProduct, MatAt, SeqAt, T, TimeProduct, TimeSum, equal, matrix_sum, t

j = sp.Symbol("j", integer=True)
k = sp.Symbol("k", integer=True)
i = sp.Symbol("i", integer=True)


class NoClosedForm(ValueError):
    """The recursion is not of the form A dL/dh_{t+1} + b_t for a single state."""


class NotLeftMultiple(NoClosedForm):
    """A sum that should be M times an adjoint has a term that is not; the message shows the expressions."""

    in_words = "a term of the recursion is not a matrix times the adjoint it reads"


@dataclass(frozen=True)
class ClosedForm:
    seq: object
    jacobian: object  # A_k: the transposed Jacobian at step k
    local: object  # b_j: the local term at step j
    expr: object  # sum_{j=t}^{T} (prod_{k=t+1}^{j} A_k) b_j

    @property
    def is_power(self):
        return k not in self.jacobian.free_symbols

    def reindexed(self):
        """d2l's form: with i = T + t - j the sum runs over i = t..T."""
        body = self.expr.body.subs(j, T + t - i)
        return TimeSum(body, i, t, T)


def linear_coefficient(expr, adjoint):
    """M such that expr == M * adjoint, for expr linear in adjoint on the right."""
    if expr == adjoint:
        return sp.Identity(adjoint.shape[0])
    if isinstance(expr, sp.ZeroMatrix):  # no term reads the adjoint
        return sp.ZeroMatrix(expr.shape[0], adjoint.shape[0])
    if isinstance(expr, sp.MatAdd):
        return sp.MatAdd(*(linear_coefficient(term, adjoint) for term in expr.args)).doit(deep=False)
    if isinstance(expr, sp.MatMul) and expr.args[-1] == adjoint:
        return sp.MatMul(*expr.args[:-1]).doit(deep=False)
    if _rows_of(expr, adjoint):  # v[a:b, :] = I[a:b, :] v
        return _selection(expr)
    if isinstance(expr, sp.MatMul) and _rows_of(expr.args[-1], adjoint):
        return sp.MatMul(*expr.args[:-1], _selection(expr.args[-1])).doit(deep=False)
    if isinstance(expr, Placed) and expr.shape[1] == 1:  # the value in rows a:b of a vector: I[a:b, :]^T value
        return (_selection(expr.block).T * linear_coefficient(expr.value, adjoint)).doit(deep=False)
    if isinstance(expr, sp.MatMul) and isinstance(expr.args[-1], sp.MatAdd):
        return (sp.MatMul(*expr.args[:-1]) * linear_coefficient(expr.args[-1], adjoint)).doit(deep=False)
    raise NotLeftMultiple(f"{expr} is not a left multiple of {adjoint}")


def _rows_of(expr, vector):
    return isinstance(expr, sp.MatrixSlice) and expr.parent == vector


def _selection(block):
    """The rows a slice of a vector reads, as the matrix that selects them: I[a:b, :]."""
    return sp.MatrixSlice(sp.Identity(block.parent.shape[0]), block.rowslice, (0, block.parent.shape[0], 1))


def closed_form(derivation, seq):
    """The ClosedForm of dL/d seq_t, or NoClosedForm for cells it does not cover."""
    if len(derivation.states) != 1:
        raise NoClosedForm("closed forms are derived for single-state cells")
    contributions = derivation.states[seq]
    nxt = [c.value for c in contributions if c.when == NEXT]
    same = [c.value for c in contributions if c.when == SAME]
    adjoint_next = Adj(seq(t + 1))
    jacobian = linear_coefficient(matrix_sum(nxt), adjoint_next) if nxt else None
    local = matrix_sum(same)
    if jacobian is None or any(a.of.role != "output" for a in atoms(local, Adj)):
        raise NoClosedForm("the local term must depend on output adjoints only")
    jacobian_k = jacobian.subs(t, k - 1)
    if k in jacobian_k.free_symbols:
        product = TimeProduct(jacobian_k, k, t + 1, j)
    else:
        product = sp.MatPow(jacobian_k, j - t)
    return ClosedForm(seq, jacobian_k, local.subs(t, j), TimeSum(product * local.subs(t, j), j, t, T))


def recursion_residual(form):
    """The two facts that make the closed form solve the recursion, as pairs that must be equal.

    terminal: the sum at t = T has the single term b_T;
    step:     sum at t == b_t + A_{t+1} (sum at t+1), by peeling the j = t term
              and prepending A_{t+1} to every ordered product.
    """
    body = form.expr.body
    at_terminal = _simplify_product(body.subs(t, T).subs(j, T))
    peeled = _simplify_product(body.subs(j, t))
    rest = TimeSum(body, j, t + 1, T)
    next_sum = form.expr.subs(t, t + 1)
    prepended = TimeSum(form.jacobian.subs(k, t + 1) * next_sum.body, j, t + 1, T)
    return [
        (at_terminal, form.local.subs(j, T)),
        (peeled, form.local.subs(j, t)),
        (_merge_products(prepended), rest),
    ]


def _simplify_product(expr):
    """Empty ordered products and zeroth powers are the identity."""

    def empty(e):
        if isinstance(e, TimeProduct):
            return equal(e.end + 1, e.start)
        return isinstance(e, sp.MatPow) and equal(e.exp, 0)

    return expr.replace(empty, lambda e: sp.Identity(e.shape[0])).doit(deep=False)


def _factors(expr):
    return list(expr.args) if isinstance(expr, sp.MatMul) else [expr]


def _merge_products(expr):
    """A_{s-1} (prod_{k=s}^{e} A_k) -> prod_{k=s-1}^{e} A_k, and A A^n -> A^{n+1}."""

    def merge(matmul):
        factors = list(matmul.args)
        for n, factor in enumerate(factors):
            if isinstance(factor, TimeProduct):
                before = _factors(factor.body.subs(factor.index, factor.start - 1))
                merged = TimeProduct(factor.body, factor.index, factor.start - 1, factor.end)
            elif isinstance(factor, sp.MatPow):
                before, merged = _factors(factor.base), sp.MatPow(factor.base, factor.exp + 1)
            else:
                continue
            if factors[n - len(before) : n] == before:
                return sp.MatMul(*factors[: n - len(before)], merged, *factors[n + 1 :])
        return matmul

    return expr.replace(lambda e: isinstance(e, sp.MatMul), merge)


@dataclass(frozen=True)
class BlockClosedForm:
    """The closed form over the stacked adjoints of several states, in the order a step computes them.

    Step k's equations, each with every other value held fixed, have the named factors
    P^{uv}_k = (d v_k / d u_{k-1})^T (across: v_k reads u_{k-1}) and S^{uv}_k = (d v_k / d u_k)^T (same: v_k
    reads u_k, computed before it in the step). The step Jacobian A_k, with block A^{uv}_k = (d v_k / d u_{k-1})^T
    (the other states at k-1 held fixed, every path through step k counted), chains through the step:
    A^{uv}_k = P^{uv}_k + sum_w A^{uw}_k S^{wv}_k, over the states w that v_k reads in step k. The stacked
    adjoints zeta_t with each state of step t perturbed alone (the states computed from it in step t held fixed)
    satisfy zeta_t = A_{t+1} zeta_{t+1} + omega_t, and dL/du_t = zeta^u_t + sum_v S^{uv}_t dL/dv_t, the latest v
    first."""

    states: tuple  # the state Seqs, in the order a step computes them
    across: dict  # (u, v) -> P^{uv}_k, where v_k reads u_{k-1}
    same: dict  # (u, v) -> S^{uv}_k, where v_k reads u_k
    chain: dict  # (u, v) -> A^{uv}_k in named factors (P, S and other A blocks), where it is not zero
    local: dict  # state -> its local term omega_j (output adjoints only)
    expr: object  # zeta_t: TimeSum over j of TimeProduct of A_k times omega_j, with A_k and omega_j as symbols
    jacobian: object  # A_k, a MatAt standing for the block matrix of blocks
    stacked_local: object  # omega_j, a SeqAt standing for the stacked local terms
    reverse: bool = False  # reverse-time states: B_k = (d s_k / d s_{k+1})^T, unrolled from t = 1

    @property
    def letter(self):
        """A for the step Jacobian of forward states, B for reverse-time ones."""
        return "B" if self.reverse else "A"

    def block_matrix(self):
        """A_k as a BlockMatrix of its named blocks."""
        return sp.BlockMatrix([[block_name(r, c, self.letter) for c in self.states] for r in self.states])

    @property
    def blocks(self):
        """{(u, v): A^{uv}_k written out}, a ZeroMatrix where v_k does not depend on u_{k-1}."""
        named, name = self.factors(), functools.partial(block_name, letter=self.letter)
        out = {}
        for col in self.states:  # in step order: a block reads the blocks of the states before its column
            for row in self.states:
                chained = self.chain.get((row, col))
                if chained is None:
                    out[(row, col)] = sp.ZeroMatrix(row.rows, col.rows)
                    continue
                named[name(row, col)] = chained.xreplace(named).doit(deep=False)
                out[(row, col)] = named[name(row, col)]
        return out

    def factors(self):
        """{the name of each P and S factor: its value}."""
        found = {factor_name("P", *pair): value for pair, value in self.across.items()}
        return found | {factor_name("S", *pair): value for pair, value in self.same.items()}


def block_name(row, col, letter="A"):
    """The symbol of block (row, col) of A_k, e.g. A_k^{hc} (B_k^{hc} for reverse-time states)."""
    return factor_name(letter, row, col)


def factor_name(letter, row, col, time=k):
    """A named factor of step k: A^{hc}_k, P^{hc}_k (from step k-1) or S^{ch}_k (within step k); A^{h1,c2}_k
    where a name is longer than a letter."""
    names = [seq.name for seq in (row, col)]  # c_f is printed cf (documents/latex.py)
    comma = "," if max(map(len, names)) > 1 else ""
    return MatAt(f"{letter}^{names[0]}{comma}{names[1]}", time, row.rows, col.rows)


def block_closed_form(derivation, states=None, reverse=False):
    """The BlockClosedForm of a derivation with every intermediate substituted and several states (those of one
    direction: `states`, reverse-time ones with reverse=True); the adjoints of the other direction's states at the
    same step enter the local terms."""
    states = tuple(derivation.states) if states is None else tuple(states)
    if len(states) < 2:
        raise NoClosedForm("a block closed form is for cells with several states")
    order = [seq for seq, _ in derivation.model.steps]
    states = tuple(sorted(states, key=order.index))
    shift, names = (-1 if reverse else 1), {s.name for s in states}
    across, same, local = {}, {}, {}
    for row in states:
        by_adjoint, rest = {}, []
        for term in _terms(derivation.recursion(row)):
            last = term.as_coeff_matrices()[1][-1] if isinstance(term, sp.MatMul) else term
            if isinstance(last, Adj) and last.of.name in names and last.of.time in (t, t + shift):
                by_adjoint.setdefault(last, []).append(term)
            else:
                rest.append(term)
        if any(not _known(a, names) for term in rest for a in atoms(term, Adj)):
            raise NoClosedForm("the local term must depend on output adjoints only")
        for adjoint, terms in by_adjoint.items():
            col = next(s for s in states if s.name == adjoint.of.name)
            coefficient = linear_coefficient(matrix_sum(terms), adjoint)
            if adjoint.of.time == t + shift:
                across[(row, col)] = coefficient.subs(t, k - shift)
            else:
                same[(row, col)] = coefficient.subs(t, k)
        local[row] = matrix_sum(rest, row.rows).subs(t, j)
    size = sum(s.rows for s in states)
    letter = "B" if reverse else "A"
    jacobian = MatAt(letter, k, size)
    omega = SeqAt("kappa" if reverse else "omega", j, size, "intermediate")
    if reverse:
        expr = TimeSum(DescendingTimeProduct(jacobian, k, j, t - 1) * omega, j, 1, t)
    else:
        expr = TimeSum(TimeProduct(jacobian, k, t + 1, j) * omega, j, t, T)
    chain = _chain(states, across, same, letter)
    return BlockClosedForm(states, across, same, chain, local, expr, jacobian, omega, reverse)


def _known(adjoint, names):
    """An adjoint a local term may read: an output's, or another direction's state at the same step."""
    return adjoint.of.role == "output" or (
        adjoint.of.role == "state" and adjoint.of.name not in names and adjoint.of.time == t
    )


def _terms(expr):
    return expr.args if isinstance(expr, sp.MatAdd) else (expr,)


def _chain(states, across, same, letter="A"):
    """{(u, v): A^{uv}_k = P^{uv}_k + sum_w A^{uw}_k S^{wv}_k} where it is not zero, column by column in step order;
    a block equal to its P factor alone is that factor's value, unnamed."""
    chain = {}
    for col in states:
        for row in states:
            terms = [across[(row, col)]] if (row, col) in across else []
            if (row, col) in across and any((w, col) in same and (row, w) in chain for w in states):
                terms = [factor_name("P", row, col)]
            terms += [
                factor_name(letter, row, w) * factor_name("S", w, col)
                for w in states
                if (w, col) in same and (row, w) in chain
            ]
            if terms:
                chain[(row, col)] = matrix_sum(terms)
    return chain
