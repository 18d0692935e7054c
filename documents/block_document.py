"""The closed form of a cell with several states, over the stacked adjoint, as a document section."""

from bptt.derive.closed_form import ClosedForm, NoClosedForm, block_name, k, recursion_residual
from bptt.derive.nodes import Adj, MatAt, SeqAt, t
from bptt.derive.truncation import windowed
from bptt.documents.equation import Equation, Section, displays, equation
from bptt.documents.latex import latex
from bptt.documents.linebreak import bracketed
from bptt.documents.prose import listed, maths, reason

DELTA = "delta"  # the stacked adjoint's name


def _stacked(form, time=t):
    return SeqAt(DELTA, time, sum(s.rows for s in form.states), "intermediate")


def _blocks(lhs, rows, why):
    """The Equation lhs = a block matrix written inline, rows separated by `;` and blocks by `,` (no matrix
    environment, so it reads the same in LaTeX and in Markdown's MathJax), broken into lines where it is too wide
    (a cell of many states)."""
    items = bracketed([[latex(item) for item in row] for row in rows])
    rhs = items[0].text + "".join(piece.glue + piece.text for piece in items[1:])
    return Equation(lhs, rhs, why, pieces=items)


def _reaches(row, col, couplings):
    """How the block (row, col) carries the adjoint: from col at step k to row at k-1, counting the paths
    through the states that step k-1 computes from row (the flow's same-step couplings)."""
    via = [maths(other(k - 1)) for other, source in couplings if source == row and other != row]
    through = (
        f", counting the paths through {listed(via)}, which step $k-1$ computes from ${latex(row(k - 1))}$"
        if via
        else ""
    )
    return rf"How $\partial L / \partial {latex(col(k))}$ reaches $\partial L / \partial {latex(row(k - 1))}${through}:"


def block_section(facts):
    """The stacked adjoint, the block transposed Jacobian A_k, the local terms and the closed form."""
    form = facts.block
    if isinstance(form, NoClosedForm):
        return Section("closed-form", "Closed form", f"No closed form is shown: {reason(form)}.", ())
    states = form.states
    stacked = ClosedForm(None, form.jacobian, form.stacked_local, form.expr)  # one recursion over delta_t
    proved = all(a == b for a, b in recursion_residual(stacked))
    equations = [
        _blocks(latex(_stacked(form)), [[Adj(s())] for s in states], ""),
        _blocks(
            latex(form.jacobian),
            [[block_name(r, c) for c in states] for r in states],
            "The block transposed Jacobian of step $k$: the block in the row of a state $\\mathbf{u}$ and the column "
            r"of a state $\mathbf{v}$ is $\left(\partial \mathbf{v}_{k} / \partial \mathbf{u}_{k-1}\right)^\top$:",
        ),
    ]
    couplings = () if isinstance(facts.flow, NoClosedForm) else tuple(facts.flow.couplings)
    for (row, col), block in form.blocks.items():
        equations.append(equation(latex(block_name(row, col)), block, _reaches(row, col, couplings)))
    local_names = [MatAt(f"beta^{s.name}", form.expr.index, s.rows, 1) for s in states]
    equations.append(
        _blocks(
            latex(form.stacked_local),
            [[name] for name in local_names],
            "The local terms, what each state's adjoint receives from the outputs of its own step:",
        )
    )
    for name, state in zip(local_names, states, strict=True):
        equations.append(
            equation(
                latex(name),
                form.local[state],
                "The local terms, what each state's adjoint receives from the outputs of its own step:",
            )
        )
    check = " It satisfies the recursion (checked symbolically), as for a single state." if proved else ""
    recursion = (
        rf"${latex(_stacked(form))} = {latex(form.jacobian.subs(k, t + 1))} {latex(_stacked(form, t + 1))}"
        rf" + {latex(form.stacked_local.subs(form.expr.index, t))}$"
    )
    equations.append(
        equation(
            latex(_stacked(form)),
            form.expr,
            f"Unrolling the stacked recursion {recursion} from $t = T$, the oldest step's block Jacobian on the left "
            f"(none when $j = t$).{check} So:",
        )
    )
    names = listed(maths(s()) for s in states)
    text = f"With several states, stack their adjoints: the recursions of {names} become one, over:"
    return Section("closed-form", "Closed form over the stacked states", text, displays(equations), ("adjoint",))


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
            "$t \\ge j - \\tau$ only:",
        )
    ]
