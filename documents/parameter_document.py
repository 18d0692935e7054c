"""The parameter gradients of a derivation as a document section: a display per equation that reads
parameters, the gradients of the parameters it reads in it."""

import sympy as sp

from bptt.derive.blocks import split
from bptt.derive.nodes import SeqAt, TimeSum, matrix_sum, t
from bptt.documents.equation import Section, displays, equation
from bptt.documents.latex import latex
from bptt.documents.prose import through

BLOCKS = (
    "The steps read {} by blocks, so its gradient is theirs, each in its rows and columns "
    "(counted from 1, both ends included), zero where no step reads it:"
)


def param_section(model, derivation):
    equations = []
    for p in _by_reader(model, derivation):
        whole, placed = split(derivation.param_gradient(p))
        why = (
            f"Through {through(derivation.params[p], written=model.written)}:"
            if derivation.params[p]
            else "No equation the loss reads reads it:"
        )
        lhs = rf"\frac{{\partial L}}{{\partial {latex(p)}}}"
        if whole:
            equations.append(equation(lhs, forced_data(model, matrix_sum(whole)), why))
        for block in placed:
            lhs = rf"\frac{{\partial L}}{{\partial {latex(block.block)}}}"
            first = BLOCKS.format(f"${latex(p)}$") if block is placed[0] else ""
            equations.append(equation(lhs, forced_data(model, block.value), first if not whole else why))
    text = (
        "Each parameter is shared by every step, so its gradient is the sum over $t$ of the chain rule through "
        "the equations of step $t$ that read it."
    )
    return Section("parameters", "Parameter gradients", text, displays(equations), ("adjoint",))


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
