"""The gradient-flow part of a derivation: the Jacobian product, its bound, powers of a constant
Jacobian, clipping, and the diagonal paths of gated cells."""

from bptt.derive.closed_form import k
from bptt.derive.elementwise import FUNCTIONS
from bptt.derive.flow import eigen_power_step, gradient_flow
from bptt.derive.nodes import T, t
from bptt.documents.equation import Equation, Section, equation
from bptt.documents.latex import latex

PASCANU = "Pascanu, Mikolov and Bengio, 2013"
BLOCKS = (
    " With several states the Jacobian of a step is a block matrix. Below are the blocks of the stacked closed "
    "form's $\\mathbf{A}_k$, transposed; a state's adjoint there carries the paths through the states computed from "
    "it in the same step."
)
NO_BOUND = (
    " No bound of the form $(\\gamma \\sigma_{\\max}(\\mathbf{W}))^{T-t}$ is read off a sum of products: "
    "the gates' values decide how much flows (bptt analyze measures it)."
)


def _d(top, bottom):
    """d top / d bottom; top a SymPy value or LaTeX."""
    top = top if isinstance(top, str) else latex(top)
    return rf"\frac{{\partial {top}}}{{\partial {latex(bottom)}}}"


def flow_section(model):
    """The Section on gradient flow through time of a model's derivation."""
    flow = gradient_flow(model)
    if not flow.states:
        text = (
            "No step reads the past but as data (teacher forcing) or through a flat function: the Jacobian between "
            "steps is zero, no gradient flows back through time, and nothing can vanish or explode. Clipping still "
            "caps a step's size."
        )
        return Section("Gradient flow through time", text, _clipping())
    text = (
        "How the gradient of the loss at step $T$ reaches an earlier step $t$: through the Jacobians of the "
        "$T - t$ steps between (Dive into Deep Learning, 9.7; the WildML tutorial, part 3)."
    )
    equations = _single(flow) if flow.jacobian is not None else _blocks(flow)
    text += "" if flow.jacobian is not None else BLOCKS + NO_BOUND
    equations += _carousels(flow) + _clipping()
    return Section("Gradient flow through time", text, tuple(equations))


def _single(flow):
    seq = flow.states[0]
    lhs = _d(seq(T), seq(t))
    out = [
        equation(
            rf"\mathbf{{J}}_k = {_d(seq(k), seq(k - 1))}",
            flow.jacobian,
            "The step's Jacobian: the transpose of the closed form's $\\mathbf{A}_k$.",
        )
    ]
    why = (
        "The chain rule through the steps between, the newest step's Jacobian on the left: matrices do not "
        "commute, so the order matters. Transposed, it is the closed form's $\\mathbf{A}_{t+1} \\cdots \\mathbf{A}_T$, "
        f"which carries ${_d('L_T', seq(T))}$ back to ${_d('L_T', seq(t))}$."
    )
    if flow.is_power:
        power = f"{latex(flow.jacobian)}^{{T-t}}"
        out.append(Equation(lhs, power, why + " Here every factor is the same matrix, a power."))
        out += _bound(flow, lhs, f"\\left\\|{power}\\right\\|_2") + _eigen(flow, lhs, power)
    else:
        if flow.bound is None:
            why += NO_BOUND
        out.append(Equation(lhs, r"\mathbf{J}_T \mathbf{J}_{T-1} \cdots \mathbf{J}_{t+1}", why))
        out += _bound(flow, lhs, r"\left\|\mathbf{J}_T \cdots \mathbf{J}_{t+1}\right\|_2")
    return out


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
                "The largest slope of the activation (1 for $\\tanh$, $\\frac{1}{4}$ for the sigmoid): every "
                "diagonal factor of $\\mathbf{J}_k$ has norm at most $\\gamma$.",
            )
        )
    slopes = " \\le \\gamma" if flow.bound.slopes else ""
    diag = (
        f"$\\left\\|\\operatorname{{diag}}(\\mathbf{{v}})\\right\\|_2 = \\max_i |v_i|{slopes}$ and " if slopes else ""
    )
    threshold = "1 / \\gamma" if slopes else "1"
    why = (
        f"The norm of a product is at most the product of the norms, with {diag}"
        f"$\\left\\|\\mathbf{{W}}\\right\\|_2 = \\sigma_{{\\max}}(\\mathbf{{W}})$, the largest singular value ({PASCANU}). "
        "A base below 1 makes the gradient vanish exponentially in $T - t$ (a sufficient condition); "
        f"exploding needs a base above 1, $\\sigma_{{\\max}} > {threshold}$ (a necessary condition)."
    )
    base = sigma if gamma == "1" else rf"{gamma} \, {sigma}"
    out.append(Equation(rf"\left\|{lhs}\right\|_2", rf"{norm} \le \left({base}\right)^{{T-t}}", why))
    return out


def _eigen(flow, lhs, power):
    """W = Q Lambda Q^-1 gives W^n = Q Lambda^n Q^-1 (the induction step checked by SymPy), and d2l's exercise."""
    step, expected = eigen_power_step()
    checked = " (checked symbolically)" if step.doit() == expected else ""
    out = [
        Equation(
            power,
            r"\mathbf{Q} \boldsymbol{\Lambda}^{T-t} \mathbf{Q}^{-1}",
            f"For a diagonalizable ${latex(flow.jacobian)} = \\mathbf{{Q}} \\boldsymbol{{\\Lambda}} \\mathbf{{Q}}^{{-1}}$ "
            f"the inner $\\mathbf{{Q}}^{{-1}} \\mathbf{{Q}}$ cancel{checked}, so "
            "$\\boldsymbol{\\Lambda}^{T-t} = \\operatorname{diag}(\\lambda_i^{T-t})$: along an eigenvector the gradient is "
            "scaled by $\\lambda_i^{T-t}$, which vanishes for $|\\lambda_i| < 1$ and explodes for $|\\lambda_i| > 1$. "
            "For a normal matrix ($\\mathbf{Q}$ unitary) the norm of the power is exactly $\\rho^{T-t}$, "
            "$\\rho$ the spectral radius.",
        ),
        Equation(
            r"\mathbf{M}^{k} \mathbf{x}",
            r"\sum_{i} c_i \lambda_i^{k} \mathbf{v}_i",
            "The exercise of Dive into Deep Learning, 9.7: for a symmetric $\\mathbf{M}$ with orthonormal eigenvectors "
            "$\\mathbf{v}_i$, eigenvalues $|\\lambda_1| > |\\lambda_2| \\ge \\ldots$ and "
            "$\\mathbf{x} = \\sum_i c_i \\mathbf{v}_i$, $c_1 \\ne 0$.",
        ),
        Equation(
            r"\operatorname{tan}^2 \theta_k",
            r"\sum_{i \ge 2} \frac{c_i^2}{c_1^2} \left(\frac{\lambda_i}{\lambda_1}\right)^{2k}"
            r" \le \left(\frac{\lambda_2}{\lambda_1}\right)^{2k} \operatorname{tan}^2 \theta_0",
            "The angle $\\theta_k$ between $\\mathbf{M}^k \\mathbf{x}$ and $\\mathbf{v}_1$ shrinks at the rate "
            "$|\\lambda_2| / |\\lambda_1|$ per step, so $|\\cos \\theta_k| \\to 1$: powers align with the top eigenvector "
            "(power iteration), and the gradient with it.",
        ),
    ]
    return out


def _blocks(flow):
    out = []
    for (row, col), block in flow.blocks.items():
        name = rf"\left(\mathbf{{A}}^{{{col.name}{row.name}}}_{{k}}\right)^\top"
        out.append(equation(name, block, f"How ${latex(row(k))}$ moves with ${latex(col(k - 1))}$."))
    return out


def _carousels(flow):
    out = []
    for found in flow.carousels:
        seq, vector = found.state, found.direct.vector
        factor = latex(vector.subs(k, T)) if not vector.is_MatAdd else rf"\left({latex(vector.subs(k, T))}\right)"
        last = latex(vector.subs(k, t + 1)) if not vector.is_MatAdd else rf"\left({latex(vector.subs(k, t + 1))}\right)"
        direct = latex(found.direct)
        if flow.jacobian is None:
            out.append(
                equation(
                    _d(seq(k), seq(k - 1)),
                    found.partial,
                    f"The other states at step $k - 1$ held fixed: ${latex(seq())}$'s own equation reads "
                    f"${latex(seq(t - 1))}$ through the diagonal ${direct}$.",
                )
            )
        out.append(
            Equation(
                rf"\prod_{{k=t+1}}^{{T}} {direct}",
                rf"\operatorname{{diag}}\left({factor} \odot \cdots \odot {last}\right)",
                f"Along the direct path from ${latex(seq(t))}$ to ${latex(seq(T))}$ the factors are diagonal: they "
                "multiply elementwise, with no weight matrix and no activation slope, so where they are near 1 the "
                "gradient stays near 1 over long distances. It is the constant error carousel of Hochreiter and "
                "Schmidhuber (1997), whose factor is 1; a forget gate (Gers et al., 2000) lets the cell learn when "
                "to let it decay. Every other path passes through the weights and the gates' slopes, as above.",
            )
        )
    return out


def _clipping():
    return [
        Equation(
            r"\operatorname{clip}_\theta(\mathbf{g})",
            r"\min\left(1, \frac{\theta}{\left\|\mathbf{g}\right\|}\right) \mathbf{g}",
            "What the generated module's clip\\_grads(grads, $\\theta$) does: $\\mathbf{g}$ holds every array it is given "
            "(the parameters' gradients and the initial states'), $\\left\\|\\mathbf{g}\\right\\|$ is their global "
            "norm. The direction is kept and the norm becomes $\\min(\\left\\|\\mathbf{g}\\right\\|, \\theta)$: "
            "a step stays bounded when the product above explodes (Pascanu et al., 2013); "
            "it does nothing for vanishing gradients.",
        )
    ]
