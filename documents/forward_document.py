"""The forward-mode (RTRL) part of a derivation, and the recurrence lemma it rests on."""

from bptt.derive.nodes import Adj, T, TimeSum, t
from bptt.derive.rtrl import factored, forward_mode, lemma, lemma_induction, live_states, tangent_names
from bptt.derive.tangent import Tangent
from bptt.documents.equation import Equation, Section, equation
from bptt.documents.latex import latex

THROUGH = (
    "Each tangent is written through the tangents computed before it in the same step, as the adjoints are; "
    "a tangent not shown is zero along that direction. "
)


def lemma_section():
    a, b, c, solution = lemma()
    proved = all(x == y for x, y in lemma_induction(solution, b, c))
    check = (
        " Proved by induction (checked symbolically): the solution at $t = 1$ is $\\boldsymbol{\\beta}_1$; at $t + 1$, "
        "splitting the newest factor $\\boldsymbol{\\Gamma}_{t+1}$ off every product turns the $i = t$ term into "
        "$\\boldsymbol{\\Gamma}_{t+1} \\boldsymbol{\\beta}_t$ and the rest into $\\boldsymbol{\\Gamma}_{t+1}$ times the sum at $t$."
    )
    equations = (
        Equation(latex(a), f"{latex(b)} + {latex(c)} {latex(a.subs(t, t - 1))}", "With $\\boldsymbol{\\alpha}_0 = 0$."),
        Equation(
            latex(a), latex(solution), "Products run from the newest factor on the left." + (check if proved else "")
        ),
    )
    text = (
        "Any recursion $\\boldsymbol{\\alpha}_t = \\boldsymbol{\\beta}_t + \\boldsymbol{\\Gamma}_t \\boldsymbol{\\alpha}_{t-1}$ unrolls into a sum "
        "(Dive into Deep Learning, 9.7). The forward tangents above obey it with $\\boldsymbol{\\Gamma}_t$ the step's Jacobian; "
        "the closed form of the backward recursion is the same lemma run from $t = T$ down."
    )
    return Section("The recurrence lemma", text, equations)


def forward_mode_sections(model):
    """Forward mode for every parameter the state updates read, then the lemma."""
    live = live_states(model)
    equations = []
    for param in model.params:
        mode = forward_mode(model, param)
        for seq, terms in mode.tangents.items():
            start = f", with ${latex(Tangent(seq(0)))} = 0$" if seq in live else ""
            equations.append(
                equation(
                    latex(Tangent(seq())),
                    factored(terms),
                    f"Along a direction ${latex(Tangent(param))}$ of ${latex(param)}$: the chain rule forward "
                    f"through the step{start}.",
                )
            )
    if len(live) == 1:
        seq = live[0]
        jacobian = forward_mode(model, model.params[0]).jacobian(seq)
        equations.append(
            equation(
                rf"\boldsymbol{{\Gamma}}_t = \frac{{\partial {latex(seq())}}}{{\partial {latex(seq(t - 1))}}}",
                jacobian,
                "The same Jacobian for every parameter: each tangent obeys the recurrence lemma with this "
                "$\\boldsymbol{\\Gamma}_t$ and $\\boldsymbol{\\beta}_t$ its other terms. It is the transpose of $\\mathbf{A}_t$ of the backward recursion.",
            )
        )
    outputs = []
    for seq, _ in model.outputs:
        total = TimeSum(Adj(seq()).T * Tangent(seq()), t, 1, T)
        outputs.append(
            Equation(
                "\\dot{L}",
                latex(total),
                f"The gradient along the direction, with ${latex(Tangent(seq()))}$ from the chain rule through the "
                "output equation; one pass per direction, so all of $\\partial L / \\partial \\theta$ costs "
                "$|\\theta|$ tangents of the state, $O(h^2 |\\theta|)$ per step against $O(h^2)$ for BPTT.",
            )
        )
    text = (
        "Real-time recurrent learning (the WildML tutorial's $\\partial s_t / \\partial W$): carry the derivative of the state "
        "with respect to a parameter forward in time, alongside the forward pass. "
        + (THROUGH if len(tangent_names(model)) > 1 else "")
        + ("" if live else "No state links the steps here, so no tangent is carried from one step to the next.")
    )
    return [Section("Forward mode: real-time recurrent learning", text, tuple(equations + outputs)), lemma_section()]
