"""The gradient-flow part of a derivation: the Jacobian product, its bound, powers of a constant
Jacobian, clipping, and the diagonal paths of gated cells (documents/carousel_document.py)."""

from bptt.derive.closed_form import NoClosedForm, k
from bptt.derive.elementwise import FUNCTIONS
from bptt.derive.nodes import T, t
from bptt.documents.carousel_document import carousels
from bptt.documents.equation import Equation, Section, displays, equation
from bptt.documents.latex import latex
from bptt.documents.prose import past_unread, reason

LAST_LOSS = r"\ell_{T}"  # the loss of the last step, whose gradient the flow follows back
PASCANU = "Pascanu, Mikolov and Bengio, 2013"
SHORT = 3  # the most lines of a Jacobian written out again
NO_BOUND = (
    " No bound of the form $(\\gamma \\sigma_{\\max}(\\mathbf{W}))^{T-t}$ is read off a sum of products: "
    "the values along each path decide how much flows."
)


def _d(top, bottom):
    """d top / d bottom; top a SymPy value or LaTeX."""
    top = top if isinstance(top, str) else latex(top)
    return rf"\frac{{\partial {top}}}{{\partial {latex(bottom)}}}"


def flow_section(facts):
    """The Section on gradient flow through time of a model's derivation."""
    flow = facts.flow
    if isinstance(flow, NoClosedForm):
        text = f"The Jacobians between steps are not shown: {reason(flow)}."
        return Section("flow", "Gradient flow through time", text, displays(_clipping(exploding=True)))
    if not flow.states:
        text = (
            f"{past_unread(facts.model)}: the Jacobian between steps is zero, no gradient flows back through time, "
            "and nothing can vanish or explode."
        )
        return Section("flow", "Gradient flow through time", text, displays(_clipping(exploding=False)))
    text = (
        "How the gradient of the loss at step $T$ reaches an earlier step $t$: through the Jacobians of the "
        "$T - t$ steps between (Dive into Deep Learning, 9.7; the WildML tutorial, part 3)."
    )
    if flow.jacobian is None:
        closed = facts.block is not None and not isinstance(facts.block, NoClosedForm)
        shown = "the stacked closed form's step Jacobian $\\mathbf{A}_k$" if closed else "a block Jacobian"
        text += (
            f" With several states the Jacobian of a step is a block matrix, the transpose of {shown}, each state "
            "at the step before perturbed alone." + NO_BOUND
        )
    equations = _single(flow) if flow.jacobian is not None else []
    equations += carousels(facts.model, flow, facts.block) + _clipping(exploding=True)
    return Section("flow", "Gradient flow through time", text, displays(equations), ("adjoint",))


def _single(flow):
    seq = flow.states[0]
    lhs = _d(seq(T), seq(t))
    out = [
        _written_once(
            equation(
                rf"\mathbf{{J}}_k = {_d(seq(k), seq(k - 1))}",
                flow.jacobian,
                "The step's Jacobian, the transpose of the closed form's $\\mathbf{A}_k$:",
            ),
            r"\mathbf{A}_k^\top",
        )
    ]
    why = (
        "By the chain rule through the steps between, the newest step's Jacobian on the left (matrices do not "
        "commute, so the order matters)"
    )
    carries = (
        "Transposed, it is the closed form's $\\mathbf{A}_{t+1} \\cdots \\mathbf{A}_T$, "
        f"which carries $\\partial {LAST_LOSS} / \\partial {latex(seq(T))}$ back to "
        f"$\\partial {LAST_LOSS} / \\partial {latex(seq(t))}$."
    )
    if flow.is_power:
        power = f"{latex(flow.jacobian)}^{{T-t}}"
        out.append(
            Equation(lhs, power, why + "; every factor is the same matrix, so the product is a power:", after=carries)
        )
        out += _bound(flow, lhs, f"\\left\\|{power}\\right\\|_2") + _eigen(flow, power)
    else:
        after = carries + (NO_BOUND if flow.bound is None else "")
        out.append(Equation(lhs, r"\mathbf{J}_T \mathbf{J}_{T-1} \cdots \mathbf{J}_{t+1}", why + ":", after=after))
        out += _bound(flow, lhs, r"\left\|\mathbf{J}_T \cdots \mathbf{J}_{t+1}\right\|_2")
    return out


def _written_once(eq, name):
    """A Jacobian the closed form writes out already, named (`A_k^T`) where it takes more than three lines."""
    if len(eq.rows) <= SHORT:
        return eq
    return Equation(eq.lhs, name, eq.why.removesuffix(":") + ", written out there:")


def _bound(flow, lhs, norm):
    """gamma, then ||dh_T/dh_t|| <= (gamma sigma_max(W))^(T-t), or a sentence saying why there is no such bound."""
    if flow.bound is None:
        return []
    sigma = r" \, ".join(rf"\sigma_{{\max}}({latex(w)})" for w in flow.bound.matrices)
    gamma = latex(flow.bound.gamma)
    out = []
    if flow.bound.slopes:
        sups = r" \cdot ".join(rf"\sup \left|{FUNCTIONS[name].latex}'\right|" for name in flow.bound.slopes)
        out.append(
            Equation(
                r"\gamma",
                f"{sups} = {gamma}",
                "The largest slope of the activation (1 for $\\tanh$, $\\frac{1}{4}$ for the sigmoid):",
                after="Every diagonal factor of $\\mathbf{J}_k$ has norm at most $\\gamma$.",
            )
        )
    slopes = " \\le \\gamma" if flow.bound.slopes else ""
    diag = (
        f"$\\left\\|\\operatorname{{diag}}(\\mathbf{{v}})\\right\\|_2 = \\max_i |v_i|{slopes}$ and " if slopes else ""
    )
    threshold = "1 / \\gamma" if slopes else "1"
    loose = "the activations saturate or " if slopes else ""
    why = (
        f"The norm of a product is at most the product of the norms, with {diag}"
        f"$\\left\\|\\mathbf{{W}}\\right\\|_2 = \\sigma_{{\\max}}(\\mathbf{{W}})$, "
        f"the largest singular value ({PASCANU}), so:"
    )
    after = (
        "A base below 1 makes the gradient vanish exponentially in $T - t$ (a sufficient condition); "
        f"exploding needs a base above 1, $\\sigma_{{\\max}} > {threshold}$ (a necessary condition). The bound "
        f"is loose where {loose}the weights' singular vectors do not line up."
    )
    base = sigma if gamma == "1" else rf"{gamma} \, {sigma}"
    out.append(Equation(rf"\left\|{lhs}\right\|_2", rf"{norm} \le \left({base}\right)^{{T-t}}", why, after=after))
    return out


def _eigen(flow, power):
    """W = Q Lambda Q^-1 gives W^n = Q Lambda^n Q^-1, and d2l's exercise."""
    weight = latex(flow.jacobian)
    return [
        Equation(
            power,
            r"\mathbf{Q} \boldsymbol{\Lambda}^{T-t} \mathbf{Q}^{-1}",
            f"For a diagonalizable ${weight} = \\mathbf{{Q}} \\boldsymbol{{\\Lambda}} \\mathbf{{Q}}^{{-1}}$ "
            "the inner $\\mathbf{Q}^{-1} \\mathbf{Q}$ of the power cancel:",
            after=(
                "Here $\\boldsymbol{\\Lambda}^{T-t} = \\operatorname{diag}(\\lambda_i^{T-t})$. The gradient "
                f"travels back through the transpose, $({weight}^\\top)^{{T-t}}$, whose eigenvalues are the same "
                f"$\\lambda_i$: along an eigenvector of ${weight}^\\top$ the gradient is scaled by "
                "$\\lambda_i^{T-t}$, which vanishes for $|\\lambda_i| < 1$ and explodes for $|\\lambda_i| > 1$. "
                "For a normal matrix ($\\mathbf{Q}$ unitary) the norm of the power is exactly $\\rho^{T-t}$, "
                "$\\rho$ the spectral radius."
            ),
        ),
        Equation(
            r"\mathbf{M}^{k} \mathbf{x}",
            r"\sum_{i} c_i \lambda_i^{k} \mathbf{v}_i",
            "The exercise of Dive into Deep Learning, 9.7: for a symmetric $\\mathbf{M}$ with orthonormal eigenvectors "
            "$\\mathbf{v}_i$, eigenvalues $|\\lambda_1| > |\\lambda_2| \\ge \\ldots$ and "
            "$\\mathbf{x} = \\sum_i c_i \\mathbf{v}_i$, $c_1 \\ne 0$:",
        ),
        Equation(
            r"\operatorname{tan}^2 \varphi_k",
            r"\sum_{i \ge 2} \frac{c_i^2}{c_1^2} \left(\frac{\lambda_i}{\lambda_1}\right)^{2k}"
            r" \le \left(\frac{\lambda_2}{\lambda_1}\right)^{2k} \operatorname{tan}^2 \varphi_0",
            "So the angle $\\varphi_k$ between $\\mathbf{M}^k \\mathbf{x}$ and $\\mathbf{v}_1$ obeys:",
            after=(
                "It shrinks at the rate $|\\lambda_2| / |\\lambda_1|$ per step, so $|\\cos \\varphi_k| \\to 1$: powers "
                "align with the top eigenvector (power iteration), and the gradient with them."
            ),
        ),
    ]


def _clipping(exploding):
    why = (
        "Clipping the gradient by its norm (Pascanu et al., 2013): $\\mathbf{g}$ holds the gradients of every "
        "parameter and initial state, $\\left\\|\\mathbf{g}\\right\\|$ is their joint norm and $g_{\\max}$ the "
        "largest norm allowed. The direction is kept and the norm becomes "
        "$\\min(\\left\\|\\mathbf{g}\\right\\|, g_{\\max})$:"
    )
    after = (
        "A step stays bounded when the product of Jacobians explodes; clipping does nothing for vanishing gradients."
        if exploding
        else "Clipping caps a step's size."
    )
    return [
        Equation(
            r"\operatorname{clip}(\mathbf{g})",
            r"\min\left(1, \frac{g_{\max}}{\left\|\mathbf{g}\right\|}\right) \mathbf{g}",
            why,
            after=after,
        )
    ]
