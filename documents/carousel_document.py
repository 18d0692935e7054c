"""The constant error carousels of a gated cell's gradient flow (documents/flow_document.py): a state's direct path
from step to step, the product of its diagonal factors, and what else the step's Jacobian holds."""

import sympy as sp

from bptt.derive.closed_form import NoClosedForm, block_name, k
from bptt.derive.elementwise import FUNCTIONS
from bptt.derive.flow import gate, makeup
from bptt.derive.nodes import T, matrix_sum, t
from bptt.documents.equation import Equation, equation
from bptt.documents.latex import latex
from bptt.documents.prose import listed, maths


def direct_name(seq, time=k):
    """D^c_k: the factor of a state's direct path from step to step, diag(f_k) for the LSTM's c (the closed form's
    A^cc_k = (d c_k / d c_{k-1})^T holds it, and with peepholes other terms too)."""
    return rf"\mathbf{{D}}^{{{seq.name}}}_{{{latex(time)}}}"


def _in_block(block, found):
    """How the closed form's block A^cc_k holds the direct path's factor: all of it, or with other terms."""
    if block is None or isinstance(block, NoClosedForm):
        return "A block Jacobian of the step holds it and every other path from step to step."
    seq = found.state
    name = latex(block_name(seq, seq))
    if block.blocks[(seq, seq)] == found.direct:
        return f"It is the closed form's block ${name}$: nothing else leads from one to the other within a step."
    return f"The closed form's block ${name}$ holds it and the other terms."


def carousels(model, flow, block=None):
    """The equations of every constant error carousel of a flow: each state's direct path and its product."""
    out = []
    for found in flow.carousels:
        seq, vector = found.state, found.direct.vector
        factor = latex(vector.subs(k, T)) if not vector.is_MatAdd else rf"\left({latex(vector.subs(k, T))}\right)"
        last = latex(vector.subs(k, t + 1)) if not vector.is_MatAdd else rf"\left({latex(vector.subs(k, t + 1))}\right)"
        direct = latex(found.direct)
        if flow.jacobian is None and out and _alike(model, flow.carousels[0], found):
            out.append(_likewise(model, found, block, factor, last))
            continue
        if flow.jacobian is None:
            out.append(
                equation(
                    direct_name(seq),
                    found.direct,
                    f"Write ${direct_name(seq)}$ for the factor of the direct path from ${latex(seq(k - 1))}$ to "
                    f"${latex(seq(k))}$. {_in_block(block, found)} ${latex(seq(k))}$'s own equation reads "
                    f"${latex(seq(k - 1))}$ through the diagonal ${direct}${_others(model, found)}:",
                )
            )
        out.append(
            Equation(
                rf"{latex(found.direct.subs(k, T))} \cdots {latex(found.direct.subs(k, t + 1))}",
                rf"\operatorname{{diag}}\left({factor} \odot \cdots \odot {last}\right)",
                f"Along the direct path from ${latex(seq(t))}$ to ${latex(seq(T))}$, where each step reads the last "
                f"through ${direct}$, the factors are diagonal, so they multiply elementwise:",
                after=_carousel_text(model, flow, found) + (_every_path(seq) if flow.jacobian is None else ""),
            )
        )
    return out


def _alike(model, first, found):
    """Two carousels whose factors are of one kind (both a gate, of the same makeup): the second is said briefly."""
    kind = lambda c: (makeup(model, c.direct), gate(model, c.direct.vector) is not None)  # noqa: E731
    return kind(first) == kind(found) and found.partial == found.direct and first.partial == first.direct


def _likewise(model, found, block, factor, last):
    """A later carousel of the same kind as the first, in one sentence and its product."""
    seq, direct = found.state, latex(found.direct)
    why = (
        f"Likewise ${latex(seq(k))}$'s own equation reads ${latex(seq(k - 1))}$ through "
        f"${direct_name(seq)} = {direct}${_others(model, found)}. {_in_block(block, found)} Along its direct path "
        f"the factors multiply elementwise, and ${every_path_name(seq)}$ is its block that counts every path:"
    )
    lhs = rf"{latex(found.direct.subs(k, T))} \cdots {latex(found.direct.subs(k, t + 1))}"
    return Equation(lhs, rf"\operatorname{{diag}}\left({factor} \odot \cdots \odot {last}\right)", why)


def every_path_name(seq):
    """Phi^c_{T,t}: the block of a state in the Jacobian of the states at T by the states at t, every path counted."""
    return rf"\boldsymbol{{\Phi}}^{{{seq.name}}}_{{T,t}}"


def _every_path(seq):
    return (
        f" Write ${every_path_name(seq)}$ for the block of ${latex(seq(T))}$ by ${latex(seq(t))}$ in the Jacobian of "
        "all the states at step $T$ by all the states at step $t$: it counts every path, this product and those "
        "through the other states."
    )


def _others(model, found):
    """What the partial Jacobian holds besides the direct diagonal, read off its terms (peepholes: slopes)."""
    others = [term for term in _terms(found.partial) if term != found.direct]
    if not others:
        return ", and nothing else"
    rest = makeup(model, matrix_sum(others))
    held = (
        [
            f"the slope{'s' if len(rest.slopes) > 1 else ''} of "
            f"{listed(FUNCTIONS[n].latex.join('$$') for n in rest.slopes)}"
        ]
        if rest.slopes
        else []
    )
    held += (
        [f"the parameter{'s' if len(rest.scales) > 1 else ''} {listed(maths(p) for p in rest.scales)}"]
        if rest.scales
        else []
    )
    held += (
        [f"the weight{'s' if len(rest.weights) > 1 else ''} {listed(maths(p) for p in rest.weights)}"]
        if rest.weights
        else []
    )
    kind = "diagonal terms" if rest.diagonal else "terms"
    return f" and through other {kind}" + (f", which hold {listed(held)}" if held else "")


def _carousel_text(model, flow, found):
    """What the direct path's product says, from what the factors are: always diagonal, a gate or not."""
    own = makeup(model, found.direct)
    slope = (
        f"but a slope of {listed(FUNCTIONS[n].latex.join('$$') for n in own.slopes)}"
        if own.slopes
        else "and no activation slope"
    )
    text = (
        f"The product holds no weight matrix {slope}, so where its factors are near 1 the product stays near 1 "
        "over long distances, and the gradient along this path neither vanishes nor explodes. It is the constant "
        "error carousel of Hochreiter and Schmidhuber (1997), whose factor is 1."
    )
    gated = gate(model, found.direct.vector)
    if gated is not None:
        text += (
            f" Here the factor is the gate ${latex(gated(k))}$, a sigmoid the cell computes at every step: it learns "
            f"when to carry the gradient (${latex(gated(k))}$ near 1) and when to let it decay."
        )
    paths = makeup(model, flow.jacobian) if flow.jacobian is not None else None
    if len(_terms(found.partial)) > 1 or paths is not None and not paths.diagonal:
        text += " The other paths pass through the other terms of the step's Jacobian, as above."
    return text


def _terms(expr):
    return expr.args if isinstance(expr, sp.MatAdd) else (expr,)
