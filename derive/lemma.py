"""The recurrence lemma (d2l) that solves RTRL's tangent recurrence, h_dot_t = b_t + c_t h_dot_{t-1} (derive/rtrl.py),
and the facts that prove it by induction."""

import sympy as sp

from bptt.derive.nodes import DescendingTimeProduct, MatAt, SeqAt, TimeSum, t

i_lemma, j_lemma = sp.Symbol("i", integer=True), sp.Symbol("j", integer=True)
n_lemma = sp.Symbol("n", integer=True, positive=True)


def lemma(n=n_lemma):
    """The recurrence lemma (d2l): a_t = b_t + c_t a_{t-1} with a_0 = 0 gives
    a_t = b_t + sum_{i=1}^{t-1} (c_t c_{t-1} ... c_{i+1}) b_i.

    Returns (a, b, c, solution at t) with a, b vectors and c square matrices of size n."""
    # Greek letters, which no model's names clash with (the zoo has a_t, b, c and c_t)
    a, b = SeqAt("alpha", t, n, "state"), SeqAt("beta", t, n, "input")
    c = MatAt("Gamma", t, n)
    product = DescendingTimeProduct(c.subs(t, j_lemma), j_lemma, i_lemma + 1, t)
    solution = b + TimeSum(product * b.subs(t, i_lemma), i_lemma, 1, t - 1)
    return a, b, c, solution


def lemma_induction(solution, b, c):
    """The facts that prove the lemma by induction, as pairs that must be structurally equal.

    Write S(t) for the solution. Base: S(1) = b_1 (= b_1 + c_1 a_0, a_0 = 0).
    Step: S(t+1) = b_{t+1} + sum_{i=1}^{t} P(i+1, t+1) b_i. Split the newest
    factor off every product, P(i+1, t+1) = c_{t+1} P(i+1, t): the i = t term
    becomes c_{t+1} b_t, every other term c_{t+1} times S(t)'s, over S(t)'s
    range. So S(t+1) = b_{t+1} + c_{t+1} S(t)."""
    total = _sum_of(solution)
    total_next = _sum_of(solution.subs(t, t + 1))
    c_next = c.subs(t, t + 1)
    last = _empty_products(_split_newest(total_next.body.subs(i_lemma, total_next.end)))
    return [
        (_empty_sums(solution.subs(t, 1)), b.subs(t, 1)),
        (last, c_next * b),
        (_split_newest(total_next.body), c_next * total.body),
        ((total_next.start, total_next.end - 1), (total.start, total.end)),
    ]


def _sum_of(expr):
    return next(term for term in expr.args if isinstance(term, TimeSum))


def _split_newest(expr):
    """c_e c_{e-1} ... c_s -> c_e (c_{e-1} ... c_s), in every descending product."""
    return expr.replace(
        lambda e: isinstance(e, DescendingTimeProduct),
        lambda e: e.body.subs(e.index, e.end) * DescendingTimeProduct(e.body, e.index, e.start, e.end - 1),
    ).doit(deep=False)


def _empty_products(expr):
    empty = lambda e: isinstance(e, DescendingTimeProduct) and sp.simplify(e.end - e.start + 1) == 0  # noqa: E731
    return expr.replace(empty, lambda e: sp.Identity(e.shape[0])).doit(deep=False)


def _empty_sums(expr):
    empty = lambda e: isinstance(e, TimeSum) and sp.simplify(e.end - e.start + 1) == 0  # noqa: E731
    return expr.replace(empty, lambda e: sp.ZeroMatrix(*e.shape)).doit(deep=False)
