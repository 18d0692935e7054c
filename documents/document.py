"""A derivation as a document: sections of equations, each with the sentence
that says where it comes from. Equations are LaTeX, long ones broken into lines
that fit the page; render.py lays them out as a .tex or .md file."""

from dataclasses import replace

from bptt.derive.blocks import split
from bptt.derive.bptt import NEXT, derive
from bptt.derive.closed_form import NoClosedForm, closed_form, k, recursion_residual
from bptt.derive.nodes import Adj, MatAt, SeqAt, T, matrix_sum, t
from bptt.derive.truncation import chunked, randomized, randomized_closed, windowed
from bptt.documents.block_document import block_section, block_window
from bptt.documents.checkpoint_document import checkpoint_section
from bptt.documents.equation import Equation, Section, equation
from bptt.documents.flow_document import flow_section
from bptt.documents.forward_document import forward_mode_sections
from bptt.documents.latex import latex
from bptt.documents.linebreak import PAGE
from bptt.documents.width import width


def _named(model, expr):
    """Replace defining expressions by their names: softmax(s_t) -> o_t."""
    for seq, definition in model.names:
        expr = expr.replace(
            lambda e, d=definition: _shift_of(d, e) is not None, lambda e, s=seq, d=definition: s(t + _shift_of(d, e))
        )
    return expr


def _shift_of(definition, expr):
    if type(expr) is not type(definition):
        return None
    times = [a.time for a in expr.atoms(SeqAt)]
    if not times:
        return None
    shift = times[0] - t
    return shift if definition.subs(t, t + shift) == expr else None


def _through(contributions, time=t):
    """The consumer equations of some contributions at the given time step: written out when together
    they take at most a line of text, otherwise named ("the equations of ...") to keep the sentence short."""
    consumers = dict.fromkeys((latex(c.through.subs(t, time)), latex(c.rhs.subs(t, time))) for c in contributions)
    if sum(width(f"{lhs} = {rhs}") for lhs, rhs in consumers) <= PAGE:
        return "; ".join(f"${lhs} = {rhs}$" for lhs, rhs in consumers)
    names = [f"${lhs}$" for lhs, _ in consumers]
    listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    return f"the equation{'s' if len(names) > 1 else ''} of {listed}"


def model_section(model):
    weight = r"\frac{1}{T} " if model.mean else ""
    equations = [equation(latex(seq()), rhs) for seq, rhs in model.assignments]
    equations.append(Equation("L", rf"{weight}\sum_{{t=1}}^{{T}} {latex(model.loss)}", ""))
    for seq, definition in model.names:
        equations.append(equation(latex(seq()), definition, f"This names ${latex(definition)}$ in what follows."))
    text = " ".join(("One step of the cell at time $t$.", *model.notes))
    return Section("The model", text, tuple(equations))


def sections(model):
    """Every section of the derivation of BPTT for a model."""
    derivation = derive(model, named="textbook")
    out = [model_section(model), _output_section(model, derivation)]
    if model.intermediates:
        out.append(_intermediate_section(model, derivation))
    if model.teacher_forcing:
        out.append(_forcing_section(model, derivation))
    if derivation.states:
        out.append(_state_section(model, derivation))
    substituted = derive(model)  # closed forms need every intermediate substituted
    out.extend(_closed_form_sections(model, substituted))
    if derivation.states:
        out.append(_truncation_section(model, derivation, substituted))
    out.append(_param_section(model, derivation))
    if derivation.states:
        out.append(checkpoint_section(model))
    out.append(flow_section(model))
    out.extend(forward_mode_sections(model))
    return out


def _output_section(model, derivation):
    weight = r"$\frac{1}{T}$ times " if model.mean else ""
    equations = tuple(
        equation(
            latex(Adj(seq())),
            _named(model, value),
            f"Only the step-$t$ loss reads ${latex(seq())}$: {weight}the derivative of ${latex(model.loss)}$, {model.loss.derivative_in_words}.",
        )
        for seq, value in derivation.output_adjoints.items()
    )
    return Section("Gradient of the loss with respect to the outputs", "", equations)


def _intermediate_section(model, derivation):
    equations = tuple(
        equation(
            latex(Adj(seq())),
            derivation.intermediate(seq),
            f"Chain rule through {_through(derivation.intermediates[seq])}."
            + ("" if seq in derivation.named else " Substituted into the results below."),
        )
        for seq in reversed(model.intermediates)
    )
    text = (
        "An intermediate adjoint that is a single term with at most one diagonal factor is substituted where it is used; "
        "any other (a gate's, or one read twice) keeps its name, and the results below use it."
    )
    return Section("Intermediate adjoints", text, equations)


def _state_section(model, derivation):
    equations = []
    for seq in derivation.states:
        same = [c for c in derivation.states[seq] if c.when != NEXT]
        nxt = [c for c in derivation.states[seq] if c.when == NEXT]
        equations.append(
            equation(
                latex(Adj(seq(T))),
                derivation.terminal(seq),
                f"At the last step only {_through(same, T) or 'nothing'} reads ${latex(seq(T))}$.",
            )
        )
        equations.append(
            equation(
                latex(Adj(seq())),
                derivation.recursion(seq),
                f"For $t < T$, chain rule through {_through(derivation.states[seq])}.",
            )
        )
        equations.append(
            equation(
                latex(Adj(seq(0))),
                derivation.initial(seq),
                f"The initial state is read by step 1 only: {_through(nxt, 0)}.",
            )
        )
    return Section(
        "Backpropagation through time: the state adjoints", "Computed from $t = T$ down to $t = 0$.", tuple(equations)
    )


def _forcing_section(model, derivation):
    equations = []
    for seq, replacement in model.teacher_forcing:
        cut = [c for c in derivation.forced[seq] if c.when == NEXT]
        free = matrix_sum(c.value for c in derivation.forced[seq])
        equations.append(
            equation(
                latex(Adj(seq())),
                free,
                f"Free-running, {_through(cut)} reads ${latex(seq())}$, and this term would carry the gradient back "
                f"through time. Under teacher forcing step $t+1$ reads ${latex(replacement)}$ instead: "
                f"${latex(seq())}$ is data, nothing flows into it, and the term is cut.",
            )
        )
        equations.append(
            equation(
                latex(Adj(seq(0))),
                derivation.initial(seq),
                f"The given ${latex(seq(0))}$ is still read by step 1: {_through(cut, 0)}.",
            )
        )
    if derivation.states:
        rest = ", ".join(f"${latex(s())}$" for s in derivation.states)
        text = f"Backpropagation through time runs through {rest} only."
    else:
        text = (
            "Every read of the past is now data: the Jacobian of step $t+1$ with respect to step $t$ is zero, "
            "no gradient flows back through time, and each gradient below is a plain sum over $t$ of per-step terms."
        )
    return Section("Teacher forcing", text, tuple(equations))


def _jacobian_named(form):
    """The closed form with its ordered product written with the name A_k (a constant A's power stays written out)."""
    if form.is_power:
        return form
    name = MatAt("A", k, form.jacobian.shape[0])
    return replace(form, jacobian=name, expr=form.expr.xreplace({form.jacobian: name}))


def _closed_form_sections(model, derivation):
    if len(derivation.states) > 1:
        return [block_section(derivation)]
    out = []
    for seq in derivation.states:
        try:
            form = closed_form(derivation, seq)
        except NoClosedForm as why:
            out.append(Section("Closed form", f"No closed form is shown: {why}.", ()))
            continue
        proved = all(a == b for a, b in recursion_residual(form))
        check = (
            " It satisfies the recursion: its $j = t$ term is the local term and the rest is $\\mathbf{A}_{t+1}$ "
            "times the sum at $t+1$ (checked symbolically)."
            if proved
            else ""
        )
        named = _jacobian_named(form)
        jacobian = rf"\left(\partial {latex(seq(k))} / \partial {latex(seq(k - 1))}\right)^\top"
        order = (
            "the same at every step, so the product of $j - t$ of them is a power."
            if form.is_power
            else "the product runs from $k = t+1$ on the left to $k = j$ on the right, the identity when $j = t$."
        )
        lhs = latex(Adj(seq()))
        equations = [
            equation(
                latex(MatAt("A", k, form.jacobian.shape[0])),
                form.jacobian,
                f"The transposed Jacobian ${jacobian}$ of step $k$; {order}",
            ),
            equation(lhs, named.expr, "Unrolling the recursion from $t = T$." + check),
        ]
        if form.is_power:
            equations.append(equation(lhs, form.reindexed(), "The same sum with $i = T + t - j$."))
        out.append(Section("Closed form", "", tuple(equations)))
    return out


def _truncation_section(model, derivation, substituted):
    equations = []
    for seq in derivation.states:
        lhs = latex(Adj(seq()))
        equations.append(
            equation(
                lhs,
                chunked(derivation, seq),
                "Chunks of $\\tau$ steps: the state entering a chunk is detached, so the next step's term is dropped where $\\tau$ divides $t$.",
            )
        )
        equations.append(
            equation(
                lhs,
                randomized(derivation, seq),
                "Randomized (Tallec and Ollivier, 2017): $P(\\xi_t = 0) = 1 - \\pi$, $P(\\xi_t = 1/\\pi) = \\pi$, independent, so $E[\\xi_t] = 1$.",
            )
        )
        try:
            form = _jacobian_named(closed_form(substituted, seq))
        except NoClosedForm:
            continue
        equations.append(
            equation(
                lhs,
                windowed(form),
                "Window of $\\tau$ steps: the loss at step $j$ backpropagates to $t \\ge j - \\tau$ only; the closed form's sum stops early.",
            )
        )
        equations.append(
            equation(
                lhs,
                randomized_closed(form),
                "The randomized recursion unrolled: every path from step $j$ back to $t$ carries a product of independent $\\xi_k$ with mean 1, so its expectation is the full closed form: the estimate is unbiased.",
            )
        )
    equations += block_window(substituted)
    text = "Each variant changes only the next step's term of the recursion; with $\\tau \\ge T$ (or $\\pi = 1$) it is full BPTT. The parameter gradients keep their form, with these adjoints."
    return Section("Truncated backpropagation through time", text, tuple(equations))


def _param_section(model, derivation):
    equations = []
    for p in model.params:
        shared = f"${latex(p)}$ is shared by every step: sum over $t$ of the chain rule through "
        whole, placed = split(derivation.param_gradient(p))
        if whole:
            rest = ", plus its blocks below" if placed else ""
            lhs = rf"\frac{{\partial L}}{{\partial {latex(p)}}}"
            equations.append(equation(lhs, matrix_sum(whole), shared + _through(derivation.params[p]) + rest + "."))
        for block in placed:
            lhs = rf"\frac{{\partial L}}{{\partial {latex(block.block)}}}"
            comment = (
                f"The steps read ${latex(p)}$ by blocks, so its gradient is theirs, each in its rows and columns "
                "(counted from 1, both ends included), zero where no step reads it."
                if block is placed[0]
                else ""
            )
            equations.append(equation(lhs, block.value, comment))
    return Section("Parameter gradients", "", tuple(equations))
