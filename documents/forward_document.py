"""The forward-mode (RTRL) part of a derivation, and the recurrence lemma it rests on.

One parameter's tangents are shown in full, through named tangents (a line per gate); the term every
other parameter's direction adds is a table, since the rest of each step's tangents is the same."""

import sympy as sp

from bptt.derive.closed_form import NoClosedForm
from bptt.derive.lemma import lemma, lemma_induction
from bptt.derive.nodes import Adj, Diag, T, TimeSum, t
from bptt.derive.rtrl import direction_terms, factored, forward_mode, gate_names, live_states
from bptt.derive.tangent import Tangent
from bptt.documents.equation import Equation, Section, Table, displays, equation
from bptt.documents.flow_document import SHORT
from bptt.documents.latex import latex
from bptt.documents.prose import listed, maths

RTRL = (
    "Real-time recurrent learning (Williams and Zipser, 1989) carries the tangents forward in time, alongside the "
    "forward pass: the tangent $\\dot{\\mathbf{v}}$ of a value $\\mathbf{v}$ is its derivative along a direction "
    "$\\dot{\\theta}$ of the parameters, $\\dot{\\mathbf{v}} = (\\partial \\mathbf{v} / \\partial \\theta) "
    "\\, \\dot{\\theta}$."
)


def _wildml(state, param):
    """The WildML tutorial's derivative of the state by a weight, in this document's symbols (the tutorial
    names the state s, a letter that means another value in several of these documents)."""
    return (
        f" The tangent ${latex(Tangent(state()))}$ along ${latex(Tangent(param))}$ is the derivative "
        f"$\\partial {latex(state())} / \\partial {latex(param)}$ applied to ${latex(Tangent(param))}$: "
        "the derivative the WildML tutorial, part 3, carries forward."
    )


def lemma_section(facts):
    a, b, c, solution = lemma()
    proved = all(x == y for x, y in lemma_induction(solution, b, c))
    check = (
        "Proved by induction: the solution at $t = 1$ is $\\boldsymbol{\\beta}_1$; at $t + 1$, "
        "splitting the newest factor $\\boldsymbol{\\Gamma}_{t+1}$ off every product turns the $i = t$ term into "
        "$\\boldsymbol{\\Gamma}_{t+1} \\boldsymbol{\\beta}_t$ "
        "and the rest into $\\boldsymbol{\\Gamma}_{t+1}$ times the sum at $t$."
    )
    equations = (
        Equation(
            latex(a),
            f"{latex(b)} + {latex(c)} {latex(a.subs(t, t - 1))}",
            "Take the recursion, with $\\boldsymbol{\\alpha}_0 = 0$:",
        ),
        Equation(
            latex(a),
            latex(solution),
            "It unrolls into a sum over the steps $i < t$, the newest factor of each product on the left:",
            after=check if proved else "",
        ),
    )
    closed = any(not isinstance(form, NoClosedForm) for form in facts.closed.values())
    closed = closed or facts.block is not None and not isinstance(facts.block, NoClosedForm)
    text = (
        "Any recursion "
        "$\\boldsymbol{\\alpha}_t = \\boldsymbol{\\beta}_t + \\boldsymbol{\\Gamma}_t \\boldsymbol{\\alpha}_{t-1}$ "
        "unrolls into a sum (Dive into Deep Learning, 9.7). The forward tangents obey it with "
        "$\\boldsymbol{\\Gamma}_t$ the step's Jacobian"
        + ("; the closed form of the backward recursion is the same lemma run from $t = T$ down." if closed else ".")
    )
    return Section("lemma", "The recurrence lemma", text, displays(equations))


def _shown(model, named):
    """The parameter whose tangents are shown in full: the first whose direction reaches every live state."""
    live = live_states(model)
    for param in model.params:
        mode = forward_mode(model, param, named=named)
        if set(mode.carried) == set(live) and mode.tangents:
            return mode
    return forward_mode(model, model.params[0], named=named)


def forward_mode_sections(facts):
    """Forward mode: one parameter's tangents in full, a table of the others' terms; then the lemma."""
    model = facts.model
    live, named = live_states(model), gate_names(model)
    if not live:
        text = (
            f"{RTRL} No state links the steps here: a step's tangents do not depend on the step before, so nothing "
            "is carried from one step to the next, and forward mode is the chain rule within each step."
        )
        return [Section("forward", "Forward mode: real-time recurrent learning", text, ())]
    mode = _shown(model, named)
    param = mode.wrt
    starts = listed(f"${latex(Tangent(s(0)))} = 0$" for s in live)
    why = (
        f"Along a direction ${latex(Tangent(param))}$ of ${latex(param)}$ alone, the chain rule forward through the "
        f"step, each tangent written through those computed before it, from {starts}:"
    )
    equations = [equation(latex(Tangent(seq())), factored(terms), why) for seq, terms in mode.tangents.items()]
    items = [*displays(equations), _table(model, param, named)]
    items += displays(_jacobian(model, live) + _outputs(model))
    text = (
        f"{RTRL}{_wildml(live[-1], param)} Every direction gives the same equations but for the term the direction "
        "itself adds."
    )
    section = Section("forward", "Forward mode: real-time recurrent learning", text, tuple(items), ("adjoint",))
    return [section, lemma_section(facts)]


def _table(model, shown, named):
    """A row per tangent that some direction adds a term to: the terms' common left factor and each term."""
    found = {}
    for param in model.params:
        for seq, terms in direction_terms(model, param, named).items():
            found.setdefault(seq, []).append(factored(terms))
    rows = []
    for seq, terms in found.items():
        common, rests = _common_factor(terms)
        rows.append(
            (maths(Tangent(seq())), f"${latex(common)}$" if common is not None else "", listed(map(maths, rests), "or"))
        )
    why = (
        "Along a direction of another parameter the equations are the same, with the term of this table in place of "
        f"the one of ${latex(Tangent(shown))}$, in the tangent of the value whose equation reads that parameter; "
        f"along a direction of an initial state, {listed(maths(Tangent(s(0))) for s in live_states(model))}, "
        "the direction is "
        "the first tangent and no term is added:"
    )
    return Table(why, ("tangent", "factor", "times the term of one direction"), tuple(rows))


def _common_factor(terms):
    """(the first factor every term starts with, the terms without it), or (None, the terms)."""
    firsts = {term.args[0] if isinstance(term, sp.MatMul) else None for term in terms}
    first = firsts.pop() if len(firsts) == 1 else None
    if first is None or not isinstance(first, Diag):
        return None, terms
    return first, [sp.MatMul(*term.args[1:]).doit(deep=False) for term in terms]


def _jacobian(model, live):
    if len(live) != 1:
        return []
    seq = live[0]
    try:
        jacobian = forward_mode(model, seq, named=(seq,)).jacobian(seq)
    except NoClosedForm:  # a norm's tangent is linear in the state's but not a left multiple of it: no Gamma_t
        return []
    shown = equation(
        rf"\boldsymbol{{\Gamma}}_t = \frac{{\partial {latex(seq())}}}{{\partial {latex(seq(t - 1))}}}",
        jacobian,
        "The same Jacobian for every direction: each tangent obeys the recurrence lemma with this "
        "$\\boldsymbol{\\Gamma}_t$ and $\\boldsymbol{\\beta}_t$ its other terms, the transpose of the closed "
        "form's $\\mathbf{A}_t$:",
    )
    return [shown if len(shown.rows) <= SHORT else Equation(shown.lhs, r"\mathbf{A}_t^\top", shown.why)]


def _outputs(model):
    out = []
    for seq, _ in model.outputs:
        total = TimeSum(Adj(seq()).T * Tangent(seq()), t, 1, T)
        out.append(
            Equation(
                "\\dot{L}",
                latex(total),
                f"The loss's derivative along the direction, with ${latex(Tangent(seq()))}$ "
                "from the chain rule through the output equation. "
                "One pass gives one direction, so the whole gradient, $|\\theta|$ numbers, takes "
                "$|\\theta|$ directions, each carrying the tangents of the state: with $n$ numbers in the state, "
                "$O(n^2 |\\theta|)$ work per step against $O(|\\theta|)$ for BPTT, which reads each parameter once "
                "forward and twice backward:",
            )
        )
    return out
