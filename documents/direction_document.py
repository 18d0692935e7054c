"""The closed forms of a model with reverse-time states, one per state, and where the two directions meet."""

from dataclasses import replace

from bptt.derive.closed_form import BlockClosedForm, NoClosedForm, j, k
from bptt.derive.direction import reverse_states
from bptt.derive.directional import meeting, unrolled
from bptt.derive.nodes import Adj, MatAt
from bptt.documents.block_document import block_displays, named_factors
from bptt.documents.equation import Section, displays, equation
from bptt.documents.latex import latex
from bptt.documents.prose import listed, maths, reason

TITLE = "Closed form, in both directions"


def direction_sections(facts):
    forms = facts.directional
    if isinstance(forms, NoClosedForm):
        return [Section("closed-form", TITLE, f"No closed form is shown: {reason(forms)}.", ())]
    items, single = [], []
    for form in {id(f): f for f in forms.values()}.values():  # a direction of several states has one form
        if isinstance(form, BlockClosedForm):
            items += [*displays(single), *_block(form)]
            single = []
        else:
            single += _form_equations(form.seq, form)
    items += displays(single)
    text = (
        "Each state's recursion carries its own adjoint from one step to the next, and adds its local term "
        "$\\boldsymbol{\\beta}_j$, the terms of step $j$ itself. Unrolled from where it starts, a forward state's "
        "adjoint sums the local terms of the steps after it, a reverse-time state's those of the steps before it."
    )
    return [Section("closed-form", TITLE, f"{text} {_met(facts)}", tuple(items), ("adjoint",))]


def _block(form):
    """A direction of several states: its stacked closed form, as the forward one of a cell with several states."""
    way = "reverse-time" if form.reverse else "forward"
    lead = (
        f"The {way} states {listed(maths(s()) for s in form.states)} read each other from step to step: stack their "
        f"adjoints in the order a step computes them. {named_factors(form)}"
    )
    first, *rest = block_displays(form)
    return (replace(first, why=f"{lead} {first.why}"), *rest)


def _form_equations(seq, form):
    name = MatAt(f"A^{seq.name}", k, seq.rows)
    local = MatAt(f"beta^{seq.name}", j, seq.rows, 1)
    named = unrolled(form.reverse, name, local)
    partner = seq(k + 1) if form.reverse else seq(k - 1)
    jacobian = rf"\left(\partial {latex(seq(k))} / \partial {latex(partner)}\right)^\top"
    if form.reverse:
        how = (
            "Unrolling the recursion from $t = 1$: the local term of every step $j \\le t$, times the transposed "
            "Jacobians of the steps between, the latest step's on the left (none when $j = t$):"
        )
    else:
        how = (
            "Unrolling the recursion from $t = T$: the local term of every step $j \\ge t$, times the transposed "
            "Jacobians of the steps between, the oldest step's on the left (none when $j = t$):"
        )
    return [
        equation(latex(name), form.jacobian, f"For {maths(seq())}, the transposed Jacobian ${jacobian}$ of step $k$:"),
        equation(latex(local), form.local, "Its local term at step $j$:"),
        equation(latex(Adj(seq())), named, how),
    ]


def _met(facts):
    """Where the directions meet, in words: the adjoints of step t that local terms of both directions read."""
    meets = meeting(facts.substituted)
    if len(set(reverse_states(facts.model))) == len(facts.model.states):
        return "Every state runs in reverse time here: the recursions run forward in time, from $t = 1$."
    if not meets:
        return "The two directions share no adjoint of a step: their recursions are independent."
    by_readers = {}
    for adjoint, readers in meets:
        by_readers.setdefault(readers, []).append(f"${latex(adjoint)}$")
    parts = [
        f"{listed(adjoints)} {'enters' if len(adjoints) == 1 else 'enter'} the local terms of "
        f"{listed(maths(seq()) for seq in readers)}"
        for readers, adjoints in by_readers.items()
    ]
    return (
        f"The two directions meet only in their local terms, at the same step: {'; '.join(parts)}. Nothing carries "
        "a forward state's adjoint into a reverse-time state's across steps, so each recursion runs once, in its "
        "own direction, after the adjoints it reads."
    )
