"""What every backend's module.py.j2 lays out for one model: the base Layout, the import blocks, the forward
pass's body printed in place (NumPy's and torch's), and the work arrays' allocation (numpy/bodies.py holds the
NumPy backend's other bodies). Each body is printed first, then the names it read are bound at its top."""

from dataclasses import dataclass
from typing import ClassVar

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Array
from bptt.codegen.printing.bindings import (
    grouped,
    params_bound,
    sized,
    time_and_batch,
    work_bound,
)
from bptt.codegen.printing.facts import Facts
from bptt.codegen.printing.helpers import helpers
from bptt.codegen.printing.printer import RowPrinter, size_name
from bptt.codegen.printing.statements import InPlacePrinter


@dataclass(frozen=True)
class Layout:
    """What every backend's module.py.j2 places: the model's Facts, then what the backend prints for it. A
    backend's Layout adds its own bodies; its class says how its text names it."""

    facts: Facts
    imports: str  # the import blocks
    helpers: str  # the module's tail: the runtime's definitions it calls if standalone, then RUNTIME_FACTS
    losses: str  # the per-step loss, code over all steps
    forward_lines: tuple  # the body of _forward
    rtrl_lines: tuple  # the body of forward mode

    in_framework: ClassVar[str] = ""  # the title's ", in PyTorch"
    option: ClassVar[str] = ""  # the command's " --backend torch"
    arrays_are: ClassVar[str] = "Arrays are"  # the docstring's words for the arrays it takes
    array: ClassVar[str] = "array"


STANDALONE = {False: "", True: " --standalone"}  # the command's option, in a module's docstring


def imported(helpers_used, backend, extra=(), standalone=True, facts=""):
    """(imports, the module's tail) of a module whose code calls helpers_used, and whose template
    needs the `extra` import lines: the import blocks, one string; the helpers' source if standalone (else
    they are imported from the runtime: printing/helpers.py), then `facts`, what it hands the runtime."""
    blocks, source = helpers(backend).source(sorted(helpers_used), extra, standalone)
    return "\n\n".join(blocks), "\n\n\n".join(filter(None, (source, facts)))


def model_names(model):
    """Every name the model's sequences, adjoints, tangents, parameters and sizes take in the code."""
    seqs = (
        [seq.name for seq, _ in model.assignments]
        + [seq.name for seq in model.inputs]
        + [str(model.concrete_loss().target)]
    )
    names = set(seqs) | {p.name for p in model.params} | {size_name(s) for s in model.sizes}
    return names | {adjoint_array(name) for name in seqs} | {f"dot_{name}" for name in seqs}


def forward_body(program, printer_type=InPlacePrinter, grouped_work=False):
    """(arrays, lines of _forward, helpers used, the printer): program.forward printed in place by printer_type,
    the in-place printer (NumPy's) or a backend's subclass of it (torch/statements.py's TorchStatements);
    grouped_work: the work arrays that are no views bound a few to a line (`a, f = work["a"], work["f"]`), the
    sizes on one."""
    model, forward = program.model, program.forward
    accepts_out = helpers(printer_type.spelling.backend).accepts_out
    printer = printer_type(forward.arrays, accepts_out, forward.stacks, model_names(model))
    lines = printer.lines(forward.statements)
    lines = [line for line, _ in printer.prepared.values()] + lines
    arrays = list(forward.arrays) + [a for _, a in printer.prepared.values()] + list(printer.scratch.arrays.values())
    used = printer.used
    head = params_bound(used.params, model)
    viewed = views(arrays)
    bound = [a.name for a in every_array(arrays) if a.name in used.arrays]
    if grouped_work:
        head += grouped([name for name in bound if name not in viewed], "work")
        bound = [name for name in bound if name in viewed]
    head += [work_bound(name, viewed) for name in bound]
    head += sized(used.sizes, model, grouped_work)
    first = model.inputs[0].name
    head += time_and_batch(used.sizes, first)
    for seq in model.states:
        head.append(f"{seq.name}[0] = 0 if {seq.name}0 is None else {seq.name}0")
    return arrays, head + lines, used.helpers, printer


def every_array(arrays):
    """Every array by name, a group's members and spans as well (views of it)."""
    out = []
    for array in arrays:
        out.append(array)
        out += [Array(name, rows, array.steps) for name, rows in array.members]
        out += [Array(name, None, array.steps) for name, _, _ in array.spans]
    return out


def views(arrays):
    """{name: what it is a view of} for the members and spans of the groups among arrays: `a view of
    _i_f_o_g[..., :n_h]`, or `d_h's array, reused` for a member that is the whole group."""
    printer, out = RowPrinter(), {}
    for array in arrays:
        starts, offset = {}, sp.S.Zero
        for name, rows in array.members:
            starts[name] = (offset, offset + rows)
            offset += rows
        spans = [(name, starts[name][0], starts[name][1]) for name, _ in array.members]
        for name, first, count in array.spans:
            names = [m for m, _ in array.members[first : first + count]]
            spans.append((name, starts[names[0]][0], starts[names[-1]][1]))
        for name, start, stop in spans:
            whole = start == 0 and sp.expand(stop - array.rows) == 0
            out[name] = (
                f"{array.name}'s array, reused (a view of all of it)"
                if whole
                else f"a view of {array.name}[..., {_slice(printer, start, stop)}]"
            )
    return out


def _slice(printer, start, stop):
    return f"{'' if start == 0 else printer(start)}:{printer(stop)}"
