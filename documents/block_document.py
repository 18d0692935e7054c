"""The closed form of a cell with several states, over the stacked adjoint, as a document section."""

from bptt.derive.closed_form import ClosedForm, NoClosedForm, block_closed_form, block_name, k, recursion_residual
from bptt.derive.nodes import Adj, MatAt, SeqAt, t
from bptt.derive.truncation import windowed
from bptt.documents.equation import Equation, Section, equation
from bptt.documents.latex import latex

DELTA = "delta"  # the stacked adjoint's name


def _stacked(form, time=t):
    return SeqAt(DELTA, time, sum(s.rows for s in form.states), "intermediate")


def _blocks(rows):
    """A block matrix written inline, rows separated by `;` and blocks by `,` (no matrix
    environment, so it reads the same in LaTeX and in Markdown's MathJax)."""
    return r"\left[" + r" ;\; ".join(", ".join(latex(item) for item in row) for row in rows) + r"\right]"


def block_section(derivation):
    """The stacked adjoint, the block transposed Jacobian A_k, the local terms and the closed form."""
    try:
        form = block_closed_form(derivation)
    except NoClosedForm as why:
        return Section("Closed form", f"No closed form is shown: {why}.", ())
    states = form.states
    names = ", ".join(f"${latex(s())}$" for s in states)
    stacked = ClosedForm(None, form.jacobian, form.stacked_local, form.expr)  # one recursion over delta_t
    proved = all(a == b for a, b in recursion_residual(stacked))
    equations = [
        Equation(latex(_stacked(form)), _blocks([[Adj(s())] for s in states]), f"The adjoints of {names}, stacked."),
        Equation(
            latex(form.jacobian),
            _blocks([[block_name(r, c) for c in states] for r in states]),
            "The block transposed Jacobian of step $k$: the block in the row of a state $u$ and the column of "
            r"a state $v$ is $\left(\partial v_{k} / \partial u_{k-1}\right)^\top$.",
        ),
    ]
    for (row, col), block in form.blocks.items():
        equations.append(
            equation(
                latex(block_name(row, col)),
                block,
                rf"How $\partial L / \partial {latex(col(k))}$ reaches $\partial L / \partial {latex(row(k - 1))}$.",
            )
        )
    local_names = [MatAt(f"beta^{s.name}", form.expr.index, s.rows, 1) for s in states]
    equations.append(
        Equation(
            latex(form.stacked_local),
            _blocks([[name] for name in local_names]),
            "The local terms: what each state's adjoint receives from the outputs of its own step.",
        )
    )
    for name, state in zip(local_names, states, strict=True):
        equations.append(equation(latex(name), form.local[state], f"The local term of ${latex(state())}$."))
    check = " It satisfies the recursion (checked symbolically), as for a single state." if proved else ""
    equations.append(
        equation(
            latex(_stacked(form)),
            form.expr,
            "Unrolling the stacked recursion "
            rf"${latex(_stacked(form))} = {latex(form.jacobian.subs(k, t + 1))} {latex(_stacked(form, t + 1))}"
            rf" + {latex(form.stacked_local.subs(form.expr.index, t))}$ from $t = T$; the product runs from "
            "$k = t+1$ on the left to $k = j$ on the right." + check,
        )
    )
    return Section("Closed form over the stacked states", "", tuple(equations))


def block_window(derivation):
    """Window truncation in block form, for several states (nothing for one)."""
    if len(derivation.states) < 2:
        return []
    try:
        form = block_closed_form(derivation)
    except NoClosedForm:
        return []
    return [
        equation(
            latex(_stacked(form)),
            windowed(form),
            "Window of $\\tau$ steps over the stacked states: the loss at step $j$ backpropagates to $t \\ge j - \\tau$ only.",
        )
    ]
