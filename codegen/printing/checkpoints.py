"""The printed parts of a bounded-memory backward pass that depend on the model (passes/checkpoint.py):
what one segment hands back to the segment before it, and the bytes the schedule weighs."""

from bptt.codegen.ir import Copy, step_rows


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


def input_rows(model):
    """The rows of one step of the inputs: 1 for labels."""
    first = model.inputs[0]
    return 1 if first.role == "label" else first.rows


def scratch_rows(printed, derived):
    """The rows of one step of the printed arrays that hold every step and that the derivation's arrays
    (derived) do not: the in-place printer's scratch of all steps and prepared slopes."""
    names = {array.name for array in derived}
    return step_rows([array for array in printed if array.name not in names])
