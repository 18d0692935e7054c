"""The closed form of the state-adjoint recursion, derived from the recursion.

dL/dh_t = A_{t+1} dL/dh_{t+1} + b_t with dL/dh_{T+1} = 0 unrolls to
dL/dh_t = sum_{j=t}^{T} (A_{t+1} A_{t+2} ... A_j) b_j, where A_k is the
transposed Jacobian (dh_k/dh_{k-1})^T and b_j the local term. For a linear
cell A_k is constant and the product is the power A^{j-t}.
"""

import itertools
from dataclasses import dataclass

import sympy as sp

from bptt.derive.blocks import Placed
from bptt.derive.bptt import NEXT, SAME
from bptt.derive.nodes import Adj, MatAt, SeqAt, T, TimeProduct, TimeSum, matrix_sum, t

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
    if jacobian is None or any(a.of.role != "output" for a in local.atoms(Adj)):
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
            return sp.simplify(e.end - e.start + 1) == 0
        return isinstance(e, sp.MatPow) and sp.simplify(e.exp) == 0

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
    """The closed form over the stacked adjoint of several states, delta_t = (dL/dh_t; dL/dc_t; ...):
    delta_t = sum_{j=t}^{T} (A_{t+1} ... A_j) beta_j, A_k the block transposed Jacobian."""

    states: tuple  # the state Seqs, in the order they are stacked
    blocks: dict  # (row state, column state) -> block A_k^{row,col}: d(row)_{k-1} / d(col)_k, transposed
    local: dict  # state -> its local term beta_j (output adjoints only)
    expr: object  # TimeSum over j of TimeProduct of A_k times beta_j, with A_k and beta_j as symbols
    jacobian: object  # A_k, a MatAt standing for the block matrix of blocks
    stacked_local: object  # beta_j, a SeqAt standing for the stacked local terms

    def block_matrix(self):
        """A_k as a BlockMatrix of its named blocks."""
        return sp.BlockMatrix([[block_name(r, c) for c in self.states] for r in self.states])


def block_name(row, col):
    """The symbol of block (row, col) of A_k, e.g. A_k^{hc}."""
    return MatAt(f"A^{row.name}{col.name}", k, row.rows, col.rows)


def block_closed_form(derivation):
    """The BlockClosedForm of a derivation with every intermediate substituted and several states."""
    states = tuple(derivation.states)
    if len(states) < 2:
        raise NoClosedForm("a block closed form is for cells with several states")
    if any(_placed_adjoint(derivation.recursion(s)) for s in states):  # a gate's rows of a stacked adjoint
        raise NoClosedForm("the local term must depend on output adjoints only")  # as it would, after seconds
    recursion = _without_same_step_states({s: derivation.recursion(s) for s in states}, states)
    blocks, local = {}, {}
    for row in states:
        terms = sp.Add.make_args(recursion[row]) if not isinstance(recursion[row], sp.MatAdd) else recursion[row].args
        by_next = {col: [] for col in states}
        rest = []
        for term in terms:
            last = _trailing(term)
            if isinstance(last, Adj) and last.of.role == "state" and last.of.time == t + 1:
                by_next[next(s for s in states if s.name == last.of.name)].append(term)
            else:
                rest.append(term)
        if any(a.of.role != "output" for term in rest for a in term.atoms(Adj)):
            raise NoClosedForm("the local term must depend on output adjoints only")
        for col in states:
            coefficient = linear_coefficient(matrix_sum(by_next[col]), Adj(col(t + 1))) if by_next[col] else None
            blocks[(row, col)] = (
                sp.ZeroMatrix(row.rows, col.rows) if coefficient is None else coefficient.subs(t, k - 1)
            )
        local[row] = matrix_sum(rest, row.rows).subs(t, j)
    size = sum(s.rows for s in states)
    jacobian = MatAt("A", k, size)
    beta = SeqAt("beta", j, size, "intermediate")
    expr = TimeSum(TimeProduct(jacobian, k, t + 1, j) * beta, j, t, T)
    return BlockClosedForm(states, blocks, local, expr, jacobian, beta)


def _placed_adjoint(expr):
    """Whether expr holds rows of a vector placed in a longer one (blocks.Placed) that read a state's adjoint:
    such a term ends in the Placed block, not in an adjoint, whatever the products around it distribute into."""
    return any(
        isinstance(node, Placed) and any(a.of.role != "output" for a in node.atoms(Adj))
        for node in sp.preorder_traversal(expr)
    )


def _trailing(term):
    return term.as_coeff_matrices()[1][-1] if isinstance(term, sp.MatMul) else term


def _without_same_step_states(recursion, states):
    """Substitute dL/ds_t of another state read in the same step (c_t's recursion reads dL/dh_t)
    until every state adjoint left is at t+1; the step is ordered, so this ends."""
    same = {Adj(s(t)): recursion[s] for s in states}
    out = {}
    for s in states:
        others = {a: v for a, v in same.items() if a != Adj(s(t))}
        expr = _distributed(recursion[s].xreplace(others))
        for _ in states[1:]:  # until no other state's adjoint at t is left
            replaced = expr.xreplace(others)
            if replaced == expr:
                break
            expr = _distributed(replaced)
        out[s] = expr
    return out


def _distributed(expr):
    """expr with every matrix product distributed over the sums among its factors, (A + B) C = A C + B C, from
    the inside out, and nothing else: what expand(mul=True) makes of these expressions (the same expressions),
    without its rewriting of scalar fractions, several times slower."""
    if not isinstance(expr, sp.MatrixExpr) or not expr.args:
        return expr
    args = tuple(_distributed(arg) for arg in expr.args)
    if isinstance(expr, sp.MatAdd):
        return sp.MatAdd(*args).doit(deep=False)
    if not isinstance(expr, sp.MatMul):
        return expr.func(*args) if args != expr.args else expr
    if not any(isinstance(arg, sp.MatAdd) for arg in args):
        return sp.MatMul(*args).doit(deep=False)
    choices = [arg.args if isinstance(arg, sp.MatAdd) else (arg,) for arg in args]
    return sp.MatAdd(*(sp.MatMul(*factors).doit(deep=False) for factors in itertools.product(*choices))).doit(
        deep=False
    )
