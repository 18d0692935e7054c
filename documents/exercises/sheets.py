"""The problem sheet and the solution sheet of an exercise, as sections of paragraphs and displays."""

import re
from dataclasses import dataclass

import sympy as sp

from bptt.derive.nodes import Adj, t
from bptt.documents.document import model_section
from bptt.documents.equation import equation
from bptt.documents.exercises.curve import curve_question
from bptt.documents.exercises.numbers import matrix, total
from bptt.documents.latex import latex
from bptt.documents.linebreak import BUDGET
from bptt.documents.prose import listed
from bptt.documents.width import width


@dataclass(frozen=True)
class Rows:
    """A display: rows aligned on their `&=` (one row: no alignment)."""

    rows: tuple


@dataclass(frozen=True)
class Part:
    """A section of a sheet: a heading, then paragraphs (str, may hold $...$ maths) and displays (Rows)."""

    title: str
    items: tuple


def problem_parts(found, worked):
    notation = (
        "Below, $\\partial L / \\partial \\mathbf{v}$ is the gradient of the loss with respect to a value "
        "$\\mathbf{v}$, of the shape of $\\mathbf{v}$, each later value computed from $\\mathbf{v}$ as the "
        "model says; exact fractions are expected throughout."
    )
    return (_model_part(found), _data_part(found), Part("Questions", (notation, *_questions(found, worked))))


def solution_parts(found, worked):
    return (_data_part(found, given_only=True), *_solutions(found, worked))


def _model_part(found):
    section = model_section(found.model)
    items = [section.text]
    for display in section.items:
        items.append(Rows(tuple(row if "&" in row else row.replace(" = ", " &= ", 1) for row in display.rows)))
    for seq, data in found.model.teacher_forcing:
        items.append(
            f"The cell is trained with teacher forcing: for $t \\ge 1$ the next step reads ${latex(data)}$ in place "
            f"of ${latex(seq())}$, so ${latex(seq())}$ is data there and no gradient flows back through it."
        )
    return Part("The model", tuple(items))


def _named(model, expr, steps):
    """Named values for their definitions (softmax(s_k) is o_k) at every step."""
    names = {definition.subs(t, k): seq(k) for seq, definition in model.names for k in range(steps + 2)}
    return expr.xreplace(names)


def _data_part(found, given_only=False):
    model, items = found.model, []
    if not given_only:
        sizes = listed(f"${latex(size)} = {n}$ ({_size_of(model, size)})" for size, n in found.sizes.items())
        items.append(f"Take $T = {found.steps}$ steps and the sizes {sizes}. The parameters:")
        items.append(_value_rows([(latex(p), found.data[p]) for p in model.params]))
        items.append("The initial " + ("states" if len(model.states) > 1 else "state") + " and the data:")
        data = [(latex(key), value) for key, value in found.data.items() if key not in model.params]
        items.append(_value_rows(data))
        labels = [f"${latex(seq())}$" for seq in model.sequences() if seq.role == "label"]
        if labels:
            items.append(
                f"{listed(labels)} "
                f"{'is an index' if len(labels) == 1 else 'are indices'}, counted from 0: "
                "$\\operatorname{onehot}(k)$ is the column with a 1 in entry $k + 1$ and 0 elsewhere."
            )
    if found.given:
        step = "halves" if found.denominators == (2,) else "halves or quarters"
        items.append(
            "These activations would be irrational; take them as given, so that everything else is exact "
            f"arithmetic. Each is the value in {step} nearest the true one, inside the function's range:"
        )
        shown = [(_given_name(model, node, found.steps), value) for node, value in found.given.items()]
        items.append(_value_rows(shown))
    return Part("The data" if not given_only else "The given activations", tuple(items))


def _size_of(model, size):
    """What a size measures, in words: the rows of the first sequence that has them, or the classes of a label."""
    roles = ("input", "state", "output", "label", "target", "intermediate")
    for seq in sorted(model.sequences(), key=lambda seq: roles.index(seq.role)):
        if seq.rows == size:
            kind = "number of values of" if seq.role == "label" else "size of"
            return f"the {kind} ${latex(seq())}$"
    return "a size of the parameters"


def _given_name(model, node, steps):
    """`h_1 = tanh(a_1)` for a value its model names by an equation, else the activation alone."""
    names = {rhs.subs(t, k): seq(k) for seq, rhs in model.assignments for k in range(1, steps + 1)}
    shown = latex(_named(model, node, steps))
    return f"{latex(names[node])} = {shown}" if node in names else shown


def _value_rows(pairs):
    """name = value pairs, as many to a row as the page holds (every value exact)."""
    return Rows(_packed([f"{name} = {matrix(value)}" for name, value in pairs]))


def _packed(cells, most=4):
    """Cells joined by commas into rows that fit the page, at most `most` to a row."""
    rows, row = [], []
    for cell in cells:
        if row and (len(row) == most or _width(r",\quad ".join([*row, cell])) > BUDGET):
            rows.append(r",\quad ".join(row))
            row = []
        row.append(cell)
    return tuple(rows + [r",\quad ".join(row)] if row else rows)


def _width(text):
    """The estimated width of a row of maths, a pmatrix as wide as its widest row."""

    def widest(match):
        return max(match[1].split(r" \\ "), key=width)

    return width(re.sub(r"\\begin\{pmatrix\}(.*?)\\end\{pmatrix\}", widest, text))


def _adjoint(node):
    return latex(Adj(node))


def _times(steps):
    """`$t = 1, 2, 3$` (descending when steps run backwards), or `$t = 1$` for one step."""
    return "$t = " + ", ".join(str(k) for k in steps) + "$"


def _questions(found, worked):
    model, T = found.model, found.steps
    computed = [seq for seq, _ in model.assignments if seq not in model.forced]
    states = [seq for seq in model.states if seq not in model.forced]
    items = [
        f"1. The forward pass: compute {listed(f'${latex(seq())}$' for seq in computed)} for "
        f"{_times(range(1, T + 1))}, with the activations given above.",
        f"2. The gradient with respect to the outputs: compute "
        f"{listed(f'${_adjoint(seq())}$' for seq in worked.derivation.output_adjoints)} for {_times(range(1, T + 1))}.",
    ]
    initial = listed(f"${_adjoint(seq(0))}$" for seq in model.states)
    if states:
        items.append(
            f"3. Backpropagation through time: compute {listed(f'${_adjoint(seq(T))}$' for seq in states)}, then "
            f"{listed(f'${_adjoint(seq())}$' for seq in states)} for {_times(range(T - 1, 0, -1))}, each from the "
            f"step after it, and {initial}."
        )
    else:
        items.append(
            f"3. Under teacher forcing the only value a step reads from the one before is given: compute {initial}."
        )
    if worked.gate is not None:
        items.append(
            f"{len(items) + 1}. One gate's adjoint: compute ${_adjoint(worked.gate())}$ for {_times(range(1, T + 1))}."
        )
    asked = listed(f"$\\partial L / \\partial {latex(p)}$" for p in worked.asked)
    items.append(f"{len(items) + 1}. The parameter gradients: compute {asked}.")
    first = f"$\\partial L / \\partial {latex(worked.asked[0])}$"
    items += (
        []
        if not states
        else [
            f"{len(items) + 1}. Truncated BPTT in chunks of $\\tau = {found.tau}$ "
            f"{'step' if found.tau == 1 else 'steps'}: the flow from step $t+1$ into step $t$ is cut where $\\tau$ "
            f"divides $t$. Compute the state adjoints again, and the truncated {first}."
        ]
    )
    items.append(f"{len(items) + 1}. {curve_question(found, worked.flow).question}")
    return items


def _worked_rows(model, one, steps):
    """lhs = formula = the terms' values = the value, aligned on the `=`."""
    lhs = (
        latex(_named(model, one.lhs, steps))
        if not isinstance(one.lhs, sp.MatrixSymbol)
        else (rf"\frac{{\partial L}}{{\partial {latex(one.lhs)}}}")
    )
    formula = _named(model, one.formula, steps)
    shown = equation(lhs, formula)
    rows = list(shown.rows)
    rows[0] = rows[0] if "&=" in rows[0] else rows[0].replace(" = ", " &= ", 1)
    if one.shown_terms:
        rows.append("&= " + total([(_negated(term), value) for term, value in one.terms]))
    rows.append("&= " + matrix(one.value))
    return Rows(tuple(rows))


def _solutions(found, worked):
    model, steps = found.model, found.steps
    forward = []
    for k in range(1, steps + 1):
        cells = [
            f"{latex(seq(k))} = {matrix(found.env[seq(k)])}" for seq, _ in model.assignments if seq not in model.forced
        ]
        forward.append(Rows(_packed(cells)))
    parts = [Part("1. The forward pass", tuple(forward))]
    parts.append(Part("2. The output adjoints", tuple(_worked_rows(model, one, steps) for one in worked.outputs)))
    parts.append(Part("3. The state adjoints", tuple(_worked_rows(model, one, steps) for one in worked.backward)))
    number_of = 4
    if worked.gate is not None:
        gate = [one for one in worked.backward if getattr(one.lhs, "of", one.lhs).name == worked.gate.name]
        text = f"The values found above on the way: {listed(f'${latex(one.lhs)}$' for one in gate)}."
        parts.append(Part(f"4. The adjoint of ${latex(worked.gate())}$", (text,)))
        number_of = 5
    parts.append(
        Part(
            f"{number_of}. The parameter gradients", tuple(_worked_rows(model, one, steps) for one in worked.gradients)
        )
    )
    if worked.derivation.states:
        cut = tuple(_worked_rows(model, one, steps) for one in worked.truncated + worked.truncated_gradients)
        number_of += 1
        parts.append(Part(f"{number_of}. Truncated in chunks of $\\tau = {found.tau}$", cut))
    parts.append(Part(f"{number_of + 1}. Predicting the curve", (curve_question(found, worked.flow).answer,)))
    return parts


def _negated(term):
    return isinstance(term, sp.MatMul) and bool(term.args[0].is_negative)
