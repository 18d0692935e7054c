"""The closed form of a single state's adjoint, and truncated BPTT, as document sections."""

from dataclasses import replace

import sympy as sp

from bptt.derive.bptt import NEXT
from bptt.derive.closed_form import NoClosedForm, k, recursion_residual
from bptt.derive.nodes import Adj, MatAt, SeqAt, t
from bptt.derive.truncation import Kept, Xi, randomized_closed, tau, windowed
from bptt.documents.block_document import block_window
from bptt.documents.equation import Section, displays, equation
from bptt.documents.graph_document import truncation_figure
from bptt.documents.latex import latex
from bptt.documents.prose import listed, maths, past_unread, reason

CHECK = (
    "It satisfies the recursion: its $j = t$ term is the local term and the rest is "
    "$\\mathbf{A}_{t+1}$ times the sum at $t+1$."
)


def jacobian_named(form):
    """The closed form with its ordered product written with the name A_k (a constant A's power stays written out)."""
    if form.is_power:
        return form
    name = MatAt("A", k, form.jacobian.shape[0])
    return replace(form, jacobian=name, expr=form.expr.xreplace({form.jacobian: name}))


def closed_form_sections(facts):
    out = []
    for seq, form in facts.closed.items():
        if isinstance(form, NoClosedForm):
            out.append(Section("closed-form", "Closed form", f"No closed form is shown: {reason(form)}.", ()))
            continue
        proved = all(a == b for a, b in recursion_residual(form))
        jacobian = rf"\left(\partial {latex(seq(k))} / \partial {latex(seq(k - 1))}\right)^\top"
        same = "It is the same at every step, so a product of $j - t$ of them is a power." if form.is_power else ""
        lhs = latex(Adj(seq()))
        order = (
            "the power of $\\mathbf{A}$ that carries it back over the steps between"
            if form.is_power
            else "the transposed Jacobians of the steps between, the oldest step's on the left "
            "($\\mathbf{A}_k$ is a Jacobian transposed; none when $j = t$)"
        )
        equations = [
            equation(
                latex(MatAt("A", k, form.jacobian.shape[0])),
                form.jacobian,
                f"The transposed Jacobian ${jacobian}$ of step $k$:",
            ),
            equation(
                lhs,
                jacobian_named(form).expr,
                f"Unrolling the recursion from $t = T$ gives the local term of every step $j \\ge t$, times {order}:",
                after=" ".join(filter(None, (same, CHECK if proved else ""))),
            ),
        ]
        if form.is_power:
            equations.append(
                equation(
                    lhs, form.reindexed(), "The same sum with $i = T + t - j$, as Dive into Deep Learning writes it:"
                )
            )
        out.append(Section("closed-form", "Closed form", "", displays(equations), ("adjoint",)))
    return out


def _part(name, seq, time=t):
    """nu^h_t, a part of a state's adjoint; nu_t of the stacked adjoint delta_t."""
    if seq.name == "delta":
        return SeqAt(name, time, seq.rows, "intermediate")
    return MatAt(f"{name}^{seq.name}", time, seq.rows, 1)


def truncation_section(facts):
    states = facts.states
    recursive = any(c.when == NEXT for s in states for c in facts.textbook.states[s])
    stacked = facts.block is not None and not isinstance(facts.block, NoClosedForm)
    if stacked:  # one stacked recursion for the states, as the closed form has it
        adjoints = listed(maths(Adj(s())) for s in states)
        delta = SeqAt("delta", t, sum(s.rows for s in states), "intermediate")
        parts = f"${latex(delta)} = {latex(_part('nu', delta))} + {latex(_part('beta', delta))}$"
        parts = f"the stacked column ${latex(delta)}$ of {adjoints} as {parts}"
        states = (delta,)
    else:
        parts = "each state adjoint as " + listed_parts(states)
    text = (
        "Truncation cuts the part of the recursion that comes from step $t+1$. Write the recursion of "
        f"{parts}, with $\\boldsymbol{{\\nu}}_t$ its terms through step $t+1$ and "
        "$\\boldsymbol{\\beta}_t$ those of step $t$ itself. Each way to truncate has a parameter: chunks or a window "
        "of $\\tau$ steps ($\\tau \\ge 1$ an integer), or a random cut that keeps a step's part with probability "
        "$\\pi$ ($0 < \\pi \\le 1$). With $\\tau \\ge T$ or $\\pi = 1$ each is full BPTT. The parameter gradients "
        "keep their form, with these adjoints."
    )
    if not recursive:
        text = f"{past_unread(facts.model)}: there is nothing to truncate."
        return Section("truncation", "Truncated backpropagation through time", text, (), ("adjoint",))
    chunk = (
        "Chunks of $\\tau$ steps, the first from step 1: the state entering a later chunk is detached, so "
        "$\\boldsymbol{\\nu}_t$ is dropped where $\\tau$ divides $t \\ge 1$, and the given initial state keeps its "
        "gradient; the bracket $[\\tau \\nmid t]$ is 1 when $\\tau$ does not divide $t$ and 0 when it does:"
    )
    randomly = (
        "Randomized (Tallec and Ollivier, 2017): $\\xi_{t+1}$ is $1/\\pi$ with probability $\\pi$ and 0 otherwise, "
        "independently at every step, so that $E[\\xi_t] = 1$:"
    )
    lhs = (lambda s: latex(s)) if stacked else (lambda s: latex(Adj(s())))  # noqa: E731
    equations = [equation(lhs(s), sp.MatAdd(Kept(t, tau) * _part("nu", s), _part("beta", s)), chunk) for s in states]
    equations += [equation(lhs(s), sp.MatAdd(Xi(t + 1) * _part("nu", s), _part("beta", s)), randomly) for s in states]
    equations += _windows(facts)
    items = (truncation_figure(facts), *displays(equations))
    return Section("truncation", "Truncated backpropagation through time", text, items, ("adjoint",))


def listed_parts(states):
    shown = [f"${latex(Adj(s()))} = {latex(_part('nu', s))} + {latex(_part('beta', s))}$" for s in states]
    return ", ".join(shown)


def _windows(facts):
    """Window truncation and the randomized closed form, for a single state's closed form; block form for several."""
    if facts.block is not None:
        return block_window(facts)
    out = []
    for seq, form in facts.closed.items():
        if isinstance(form, NoClosedForm):
            continue
        named, lhs = jacobian_named(form), latex(Adj(seq()))
        out.append(
            equation(
                lhs,
                windowed(named),
                "Window of $\\tau$ steps: the loss at step $j$ backpropagates to $t \\ge j - \\tau$ only, so the "
                "closed form's sum stops early:",
            )
        )
        out.append(
            equation(
                lhs,
                randomized_closed(named),
                "The randomized recursion unrolled: every path from step $j$ back to $t$ carries a product of "
                "independent $\\xi_k$ of mean 1, so its expectation is the full closed form, "
                "and the estimate is unbiased:",
            )
        )
    return out
