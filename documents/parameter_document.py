"""The parameter gradients of a derivation as a document section: a display per equation that reads
parameters, the gradients of the parameters it reads in it."""

import sympy as sp

from bptt.derive.blocks import split
from bptt.derive.nodes import SeqAt, TimeSum, equal, matrix_sum, t
from bptt.documents.equation import Equation, Section, displays, equation
from bptt.documents.latex import latex
from bptt.documents.prose import through

STACKED = (
    "The steps read the parameters below by blocks of rows, so a parameter's gradient stacks the blocks' "
    "gradients, $(\\mathbf{a}^\\top, \\mathbf{b}^\\top)^\\top$ being the column of $\\mathbf{a}$ above "
    "$\\mathbf{b}$:"
)
BLOCKS = (
    "The steps read {} by blocks, so its gradient is theirs, each in its rows and columns "
    "(counted from 1, both ends included), zero where no step reads it:"
)


def param_section(model, derivation):
    equations, seen, twins = [], {}, []
    for p in _by_reader(model, derivation):
        whole, placed = split(derivation.param_gradient(p))
        lhs = rf"\frac{{\partial L}}{{\partial {latex(p)}}}"
        same = seen.setdefault(_shape_free(whole, placed, p), p) if derivation.params[p] else p
        if same != p:  # b_hh where b_ih is: the same sum, said once
            twins.append((p, same))
            continue
        why = (
            f"Through {through(derivation.params[p], written=model.written)}:"
            if derivation.params[p]
            else "No equation the loss reads reads it:"
        )
        if whole:
            equations.append(equation(lhs, forced_data(model, matrix_sum(whole)), why))
        stacked = None if whole or model.teacher_forcing else _stacked_rows(p, placed)
        if stacked is not None:
            equations.append(Equation(lhs, stacked, STACKED))  # consecutive ones share the sentence's display
            continue
        for block in placed:
            lhs = rf"\frac{{\partial L}}{{\partial {latex(block.block)}}}"
            first = BLOCKS.format(f"${latex(p)}$") if block is placed[0] else ""
            equations.append(equation(lhs, forced_data(model, block.value), first if not whole else why))
    equations += _twins(twins)
    text = (
        "Each parameter is shared by every step, so its gradient is the sum over $t$ of the chain rule through "
        "the equations of step $t$ that read it."
    )
    return Section("parameters", "Parameter gradients", text, displays(equations), ("adjoint",))


def _stacked_rows(p, placed):
    """The LaTeX of sum_t (X_1^T, ..., X_n^T)^T Y for a parameter whose blocks are its rows, in order and whole,
    each sum_t X_r Y with one Y (or none): the stacked weights' gradient stacks the blocks'; else None."""
    rows, cols = p.shape
    if len(placed) < 2:
        return None
    end, columns, tails, sums = 0, [], set(), set()
    for block in placed:
        start, stop = block.block.rowslice[:2]
        value = block.value
        if block.block.colslice[:2] != (0, cols) or not equal(start, end) or not isinstance(value, TimeSum):
            return None
        coefficient, factors = (
            value.body.as_coeff_matrices() if isinstance(value.body, sp.MatMul) else (1, [value.body])
        )
        if coefficient != 1 or factors[0].shape[1] != 1 or (len(factors) > 1 and factors[0].shape[0] != stop - start):
            return None
        columns.append(factors[0])
        tails.add(tuple(factors[1:]))
        sums.add((value.index, value.start, value.end))
        end = stop
    if not equal(end, rows) or len(tails) != 1 or len(sums) != 1:
        return None
    (tail,), ((index, start, stop),) = tails, sums
    sign = latex(TimeSum(columns[0], index, start, stop)).removesuffix(latex(columns[0])).strip()
    stack = r"\left(" + ", ".join(rf"\left({latex(c)}\right)^\top" for c in columns) + r"\right)^\top"
    return " ".join([sign, stack, *(latex(f) for f in tail)])


def _twins(twins):
    """dL/d b_hh = dL/d b_ih for the parameters the steps read where they read an earlier one, under one sentence."""
    if not twins:
        return []
    these, those = (" and ".join(f"${latex(p)}$" for p in side) for side in zip(*twins, strict=True))
    plural = len(twins) > 1
    why = (
        f"The steps read {these} where they read {those}, so {'their gradients are' if plural else 'its gradient is'} "
        "the same:"
    )
    return [Equation(_gradient(p), _gradient(same), why) for p, same in twins]


def _gradient(p):
    return rf"\frac{{\partial L}}{{\partial {latex(p)}}}"


def _shape_free(whole, placed, p):
    """What a parameter's gradient is, with the parameter's own name left out: equal for b_ih and b_hh."""
    blocks = tuple((b.block.rowslice, b.block.colslice, b.value) for b in placed)
    return (p.shape, tuple(whole), blocks)


def _by_reader(model, derivation):
    """The parameters in the order of the first equation that reads each (those no equation reads last),
    so that the parameters of one equation are shown together."""
    order = [seq.name for seq, _ in model.assignments]

    def first_reader(p):
        readers = [order.index(c.through.name) for c in derivation.params[p]]
        return min(readers, default=len(order))

    return sorted(model.params, key=first_reader)


def forced_data(model, gradient):
    """A parameter gradient with a teacher-forced state's value written as the data it is in training:
    o_t = onehot(y_t) for t >= 1, while step 1 reads the given o_0, so a sum over t that reads o_{t-1}
    splits its t = 1 term off."""
    if not model.teacher_forcing or not isinstance(gradient, TimeSum):
        return gradient
    now = {seq(t): data for seq, data in model.teacher_forcing}
    before = {seq(t - 1): data.subs(t, t - 1) for seq, data in model.teacher_forcing}
    body = gradient.body.xreplace(now)
    if not body.atoms(SeqAt) & set(before):
        return TimeSum(body, gradient.index, gradient.start, gradient.end)
    first = body.subs(gradient.index, gradient.start)
    rest = TimeSum(body.xreplace(before), gradient.index, gradient.start + 1, gradient.end)
    return sp.MatAdd(first, rest)
