"""The printed parts of a bounded-memory backward pass that depend on the model (passes/checkpoint.py):
what one segment hands back to the segment before it, and the bytes the schedule weighs."""

import sympy as sp

from bptt.codegen.ir import Copy, step_rows
from bptt.codegen.printing.printer import RowPrinter, size_name


def hand_back(printer, crossings):
    """Lines at the end of an adjoints function that put this segment's values at step 1 (its Crossings'
    `first`) into `following`, when the caller passed it: copies with a leading axis of one step (the
    Boundary of the segment before reads them at index 0)."""
    if not crossings:
        return []
    at_step = printer.at(False)
    items = ", ".join(f'"{c.name}": {at_step(Copy(c.first))}[None]' for c in crossings)
    return [
        "if following is not None:  # step 1's values, for the segment before this one",
        f"    following.update({{{items}}})",
    ]


def bytes_lines(checkpoints, model, held=(0, 0)):
    """The body of _checkpoint_bytes(sizes, B, itemsize, ages): the bytes of a kept state, of one step of
    the forward pass's arrays and of the backward pass's (its aged adjoints times ages in a window).
    held: the rows of a step a backend holds beside the derivation's arrays, forward and backward (its
    render.py says which: scratch_rows, a copy of the inputs, dL/doutputs beside the outputs)."""
    printer = RowPrinter()
    state = rows_code(printer, checkpoints.state_rows)
    forward = rows_code(printer, checkpoints.forward_rows + held[0])
    backward = rows_code(printer, checkpoints.backward_rows + held[1])
    if checkpoints.aged_rows != 0:
        backward = f"{backward} + (ages * ({rows_code(printer, checkpoints.aged_rows)}) if ages > 1 else 0)"
    head = [f'{size_name(s)} = sizes["{s}"]' for s in model.sizes if str(s) in printer.used.sizes]
    body = ["_row = B * itemsize  # one sample's row of one step"]
    return head + body + [f"return ({state}) * _row, ({forward}) * _row, ({backward}) * _row"]


def input_rows(model):
    """The rows of one step of the inputs: 1 for labels."""
    first = model.inputs[0]
    return 1 if first.role == "label" else first.rows


def scratch_rows(printed, derived):
    """The rows of one step of the printed arrays that hold every step and that the derivation's arrays
    (derived) do not: the in-place printer's scratch of all steps and prepared slopes."""
    names = {array.name for array in derived}
    return step_rows([array for array in printed if array.name not in names])


def rows_code(printer, rows):
    """Rows as code, a term at a time (a sum of sizes prints as sizes, not as a time index)."""
    return " + ".join(str(printer(term)) for term in sp.Add.make_args(sp.sympify(rows))) or "0"
