"""The tables of a module's work arrays, data its runtime makes them from (runtime/numpy_passes.py's _Passes):
each array's dims as CACHE writes them ("T+1", "B", "4*h"), the views of stacked arrays, and the rows of a
step that the checkpoint schedule weighs."""

import functools

import sympy as sp

from bptt.codegen.ir import PerCall, Steps

COLUMNS = 120  # the width generated modules keep to
STEPS = {Steps.FROM_ZERO: ("T+1", "B"), Steps.FROM_ONE: ("T", "B"), Steps.ONE: ("B",)}


@functools.lru_cache(maxsize=1024)  # printing a SymPy expression makes a printer; arrays of a model share rows
def dim_text(rows):
    """Rows as a dim of the runtime's: a sum of terms, each a count times a size ("q + 6*h"), or a count."""
    terms = []
    for term in sp.Add.make_args(sp.expand(sp.sympify(rows))):
        count, rest = term.as_coeff_Mul()
        text = str(rest).replace(" ", "")
        terms.append(str(count) if rest == 1 else text if count == 1 else f"{count}*{text}")
    return " + ".join(terms) or "0"


def dims(array):
    """An array's dims: its steps' axes, then its rows (and a weight's columns)."""
    if array.steps is Steps.ONES:
        return ("T*B",)
    if isinstance(array.steps, PerCall):
        cols = array.steps.cols
        return (dim_text(array.rows),) if cols == 1 else (dim_text(array.rows), dim_text(cols))
    return (*STEPS[array.steps], dim_text(array.rows))


def table(arrays):
    """{name: dims} of the arrays."""
    return {array.name: dims(array) for array in arrays}


def ones(arrays):
    """The names of the arrays that start as ones."""
    return tuple(array.name for array in arrays if array.steps is Steps.ONES)


def views(arrays):
    """{name: (stacked array, first row, end row)} of the members and spans of the stacked arrays."""
    out = {}
    for array in arrays:
        starts, offset = {}, sp.S.Zero
        for name, rows in array.members:
            starts[name] = (offset, offset + rows)
            out[name] = (array.name, dim_text(offset), dim_text(offset + rows))
            offset += rows
        for name, first, count in array.spans:
            names = [member for member, _ in array.members[first : first + count]]
            out[name] = (array.name, dim_text(starts[names[0]][0]), dim_text(starts[names[-1]][1]))
    return out


def step_rows(checkpoints, held=(0, 0)):
    """The rows of a kept state, of a step of the forward pass's arrays and of the backward pass's, and of
    one age of a window's aged adjoints (held: the rows of a step the backend holds beside the derivation's
    arrays, forward and backward; its render.py says which: the printer's scratch, a copy of the inputs,
    dL/doutputs beside the outputs)."""
    rows = (checkpoints.state_rows, checkpoints.forward_rows + held[0], checkpoints.backward_rows + held[1])
    return tuple(dim_text(value) for value in (*rows, checkpoints.aged_rows))


def literal(value, prefix=""):
    """A table as Python writes it: on one line after prefix if it fits in COLUMNS, else a dict's entries on
    one line of their own, indented as prefix is, four columns more (printing/columns.py packs them into
    COLUMNS once the module's names are spelled)."""
    if isinstance(value, tuple):
        return "(" + ", ".join(literal(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    if not isinstance(value, dict):
        return f'"{value}"'
    entries = ", ".join(f"{literal(key)}: {literal(item)}" for key, item in value.items())
    if len(prefix) + len(entries) + 3 <= COLUMNS:
        return "{" + entries + "}"
    indent = " " * (len(prefix) - len(prefix.lstrip()))
    return "{\n" + indent + "    " + entries + ",\n" + indent + "}"


MATHS = ("_SPEC", "_forward", "_adjoints", "_window_adjoints", "_gradients")  # what a module hands its _Passes


def spec(facts):
    """The module's _Spec: its constants, and its data's rows (labels: their classes) and outputs' name."""
    data = {"xs": facts.input.rows, "ys": facts.target.rows, "outputs": facts.output.rows}
    labels = tuple(name for name, array in (("xs", facts.input), ("ys", facts.target)) if array.labels)
    return (
        f"_DATA = {literal(data)}  # the rows of a step of xs, ys and the outputs\n"
        "_SPEC = _Spec(PARAMS, SIZES, SHAPES, STATES, CACHE, MEAN, TEACHER_FORCED, _DATA,"
        f' labels={literal(labels)}, output="{facts.output.name}")'
    )


def passes(facts, forward_arrays, backward_arrays, rows):
    """A module's last lines: its _Spec and _Passes, what it hands the runtime: its maths, and the tables
    of its work arrays (the arrays that start as ones, NumPy's, named)."""
    every = list(forward_arrays) + list(backward_arrays)
    work = {"forward_work": table(forward_arrays), "backward_work": table(backward_arrays)}
    work |= {"views": views(every)} if views(every) else {}
    entries = "".join(f"    {key}={literal(value, f'    {key}=')},\n" for key, value in work.items())
    first = ones(backward_arrays)
    first = f"ones={literal(first)}, " if first else ""
    return (
        f"{spec(facts)}\n_PASSES = _Passes(\n    {', '.join(MATHS)}, {facts.loss_helper},\n"
        f"{entries}    {first}step_rows={literal(rows)},\n)"
    )
