"""The closed form of a cell with several states, over the stacked adjoint, as a document section."""

import sympy as sp

from bptt.derive.closed_form import ClosedForm, NoClosedForm, block_name, factor_name, k, recursion_residual
from bptt.derive.nodes import Adj, MatAt, SeqAt, t
from bptt.derive.truncation import windowed
from bptt.documents.equation import Equation, Section, displays, equation
from bptt.documents.latex import latex
from bptt.documents.prose import listed, maths, reason

ZETA = "zeta"  # the stacked adjoints with each state of a step perturbed alone (eta for reverse-time states)


def _zeta(form):
    return "eta" if form.reverse else "zeta"


def _stacked(form, time=t, name=None):
    return SeqAt(name or _zeta(form), time, sum(s.rows for s in form.states), "intermediate")


def _before(form):
    """The step that step k reads: k-1, or k+1 for reverse-time states."""
    return "k+1" if form.reverse else "k-1"


def block_section(facts):
    """The named factors of a step, the step Jacobian A_k chained from them, the local terms, the closed form of
    zeta_t and each state's adjoint from it."""
    form = facts.block
    if isinstance(form, NoClosedForm):
        return Section("closed-form", "Closed form", f"No closed form is shown: {reason(form)}.", ())
    adjoints = listed(maths(Adj(s())) for s in form.states)
    text = (
        f"With several states, stack their adjoints into one column ${latex(_stacked(form, name='delta'))}$, "
        f"{adjoints} from top to bottom, in the order a step computes the states. {named_factors(form)}"
    )
    return Section("closed-form", "Closed form over the stacked states", text, block_displays(form), ("adjoint",))


def named_factors(form):
    """The sentences that name P, S and the step Jacobian's blocks."""
    before, letter = _before(form), form.letter
    return (
        "Name the derivatives of step $k$'s equations, each with every other value held fixed: "
        f"$\\mathbf{{P}}^{{uv}}_k = {_jacobian(before)}$ where $\\mathbf{{v}}_k$ reads $\\mathbf{{u}}_{{{before}}}$, "
        f"and $\\mathbf{{S}}^{{uv}}_k = {_jacobian('k')}$ where it reads $\\mathbf{{u}}_k$, computed before it in "
        f"step $k$. The step Jacobian $\\mathbf{{{letter}}}_k$ has the block "
        f"$\\mathbf{{{letter}}}^{{uv}}_k = {_jacobian(before)}$, the other states at step ${before}$ held fixed and "
        "every path through step $k$ counted."
    )


def block_displays(form):
    """The displays of a BlockClosedForm: its factors, local terms, closed form and each state's adjoint."""
    return displays(_factors(form) + _local(form) + _unrolled(form) + _adjoints(form))


def _jacobian(time):
    return rf"\left(\partial \mathbf{{v}}_k / \partial \mathbf{{u}}_{{{time}}}\right)^\top"


def _factors(form):
    """The P factors that a block of A_k adds to, the S factors, and the blocks of A_k, in named factors."""
    letter = form.letter
    named = {p for block in form.chain.values() for p in block.atoms(MatAt) if p.name.startswith("P^")}
    same = [equation(latex(factor_name("S", *pair)), value, "Within step $k$:") for pair, value in form.same.items()]
    across = [
        equation(
            latex(factor_name("P", *pair)),
            value,
            f"From step ${_before(form)}$, where a block of $\\mathbf{{{letter}}}_k$ adds to them:",
        )
        for pair, value in form.across.items()
        if factor_name("P", *pair) in named
    ]
    chain = (
        "By the chain rule through step $k$, in the order it computes the states, a block is $\\mathbf{v}_k$'s "
        "direct derivative plus the paths through each state $\\mathbf{w}$ that $\\mathbf{v}_k$ reads in step $k$: "
        f"$\\mathbf{{{letter}}}^{{uv}}_k = \\mathbf{{P}}^{{uv}}_k + \\sum_{{\\mathbf{{w}}}} "
        f"\\mathbf{{{letter}}}^{{uw}}_k \\mathbf{{S}}^{{wv}}_k$ (the blocks not shown are zero):"
    )
    blocks = [equation(latex(block_name(*pair, letter)), value, chain) for pair, value in form.chain.items()]
    return across + same + blocks


def _local(form):
    why = "The local terms, what each state's adjoint receives from the outputs of its own step" + (
        " (the others are zero):" if any(_is_zero(v) for v in form.local.values()) else ":"
    )
    if form.reverse:
        why = why.replace("the outputs of its own step", "its own step: the outputs and the other direction's states")
    index, name = form.expr.index, form.stacked_local.name
    return [
        equation(latex(MatAt(f"{name}^{s.name}", index, s.rows, 1)), value, why)
        for s, value in form.local.items()
        if not _is_zero(value)
    ]


def _is_zero(value):
    return isinstance(value, sp.ZeroMatrix)


def _unrolled(form):
    zeta, local = latex(_stacked(form)), latex(form.stacked_local.subs(form.expr.index, t))
    step = t - 1 if form.reverse else t + 1
    recursion = rf"${zeta} = {latex(form.jacobian.subs(k, step))} {latex(_stacked(form, step))} + {local}$"
    if form.reverse:
        how = "Unrolled from $t = 1$, the latest step's Jacobian on the left (none when $j = t$):"
        check = ""
    else:
        how = "Unrolled from $t = T$, the oldest step's Jacobian on the left (none when $j = t$):"
        stacked = ClosedForm(None, form.jacobian, form.stacked_local, form.expr)  # one recursion over zeta_t
        proved = all(a == b for a, b in recursion_residual(stacked))
        check = (
            f"It satisfies the recursion: its $j = t$ term is ${local}$ and the rest is "
            f"${latex(form.jacobian.subs(k, step))}$ times the sum at $t+1$."
            if proved
            else ""
        )
    why = (
        f"Write ${zeta}$ for the stacked adjoints with each state of step $t$ perturbed alone, the states computed "
        f"from it in step $t$ held fixed: {recursion}. {how}"
    )
    return [equation(zeta, form.expr, why, after=check)]


def _adjoints(form):
    """dL/du_t = zeta^u_t + sum_v S^{uv}_t dL/dv_t: each state's adjoint from zeta_t, written once for every u."""
    zeta = latex(_stacked(form))
    part = zeta.replace("_{t}", "^{u}_{t}")
    why = (
        f"Each state's adjoint is its block ${part}$ of ${zeta}$ and the paths through the states $\\mathbf{{v}}$ "
        "that read it in step $t$, taken from the last state computed to the first:"
    )
    adjoint = r"\frac{\partial L}{\partial \mathbf{%s}_{t}}"
    rhs = rf"{part} + \sum_{{\mathbf{{v}}}} \mathbf{{S}}^{{uv}}_{{t}} {adjoint % 'v'}"
    return [Equation(adjoint % "u", rhs, why)]


def block_window(facts):
    """Window truncation in block form, for several states (nothing for one)."""
    form = facts.block
    if form is None or isinstance(form, NoClosedForm):
        return []
    return [
        equation(
            latex(_stacked(form)),
            windowed(form),
            "Window of $\\tau$ steps over the stacked states: the loss at step $j$ backpropagates to "
            "$t \\ge j - \\tau$ only, and the adjoints follow from it as in the closed form:",
        )
    ]
