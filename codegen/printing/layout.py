"""What every backend's module.py.j2 lays out for one model: the base Layout, and the bodies the NumPy
backend prints (torch's forward pass too). Each body is printed first, then the names it read are bound
at its top."""

from dataclasses import dataclass
from typing import ClassVar

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Array, PerCall, Steps
from bptt.codegen.printing.array_calls import NUMPY
from bptt.codegen.printing.bindings import (
    bound,
    initial_keys,
    output_adjoint,
    quoted,
    sized,
    time_and_batch,
    work_bound,
)
from bptt.codegen.printing.checkpoints import hand_back
from bptt.codegen.printing.facts import Facts
from bptt.codegen.printing.helpers import helpers
from bptt.codegen.printing.printer import RowPrinter, size_name
from bptt.codegen.printing.products import ONES
from bptt.codegen.printing.statements import NumPyPrinter
from bptt.codegen.printing.tangents import TangentPrinter
from bptt.codegen.printing.window import window_body


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


@dataclass(frozen=True)
class Body:
    lines: tuple
    helpers: frozenset


def rtrl_body(program):
    """The body of forward_mode_grads after its checks: the Program's forward-mode statements."""
    model = program.model
    printer = TangentPrinter(stacked=False)
    lines = printer.lines(program.forward_mode.statements)
    head = bound(printer.used, model, set(), set(program.cache))
    first = output_adjoint(model)
    head += [f"T, B = {first}.shape[0], {first}.shape[1]", "grads = {}"]
    return Body(tuple(head + lines), frozenset(printer.used.helpers))


def model_names(model):
    """Every name the model's sequences, adjoints, tangents, parameters and sizes take in the code."""
    seqs = (
        [seq.name for seq, _ in model.assignments]
        + [seq.name for seq in model.inputs]
        + [str(model.concrete_loss().target)]
    )
    names = set(seqs) | {p.name for p in model.params} | {size_name(s) for s in model.sizes}
    return names | {adjoint_array(name) for name in seqs} | {f"dot_{name}" for name in seqs}


def forward_body(program, printer_type=NumPyPrinter):
    """(arrays, lines of _forward, helpers used, the printer): program.forward printed in place by printer_type,
    the NumPy printer or that printer with another library's calls (torch/statements.py's TorchStatements)."""
    model, forward = program.model, program.forward
    accepts_out = helpers(printer_type.backend).accepts_out
    printer = printer_type(forward.arrays, accepts_out, forward.stacks, model_names(model))
    lines = printer.lines(forward.statements)
    lines = [line for line, _ in printer.prepared.values()] + lines
    arrays = list(forward.arrays) + [a for _, a in printer.prepared.values()] + list(printer.scratch.arrays.values())
    used = printer.used
    head = [f"{p.name} = params[{quoted(p.name)}]" for p in model.params if p.name in used.params]
    viewed = views(arrays)
    head += [work_bound(a.name, viewed) for a in every_array(arrays) if a.name in used.arrays]
    head += sized(used.sizes, model)
    first = model.inputs[0].name
    head += time_and_batch(used.sizes, first)
    for seq in model.states:
        head.append(f"{seq.name}[0] = 0 if {seq.name}0 is None else {seq.name}0")
    return arrays, head + lines, used.helpers, printer


@dataclass(frozen=True)
class Backward:
    arrays: tuple
    adjoints: tuple
    window: tuple
    gradients: tuple
    returns: tuple
    helpers: set


def backward_bodies(program):
    model, adjoints = program.model, program.adjoints
    printer = NumPyPrinter(adjoints.arrays, helpers("numpy").accepts_out, adjoints.stacks, model_names(model))
    lines = printer.lines(adjoints.statements)
    initial = []
    for item in program.initial:
        code = printer.at(False)(item.value)
        initial.append(f"d_{item.key} = {code}  # {item.comment}")
        if item.weighted:
            initial += ["if keep is not None:", f"    d_{item.key} *= keep[0]"]
    initial += hand_back(printer, program.checkpoints.crossings)
    lines = [line for line, _ in printer.prepared.values()] + lines
    arrays = list(adjoints.arrays) + [a for _, a in printer.prepared.values()] + list(printer.scratch.arrays.values())
    work = {a.name for a in every_array(arrays)}
    cache = set(program.cache)
    viewed = views(arrays)
    body = bound(printer.used, model, work, cache, viewed)
    body += time_and_batch(printer.used.sizes, output_adjoint(model)) + lines + initial
    body.append("return " + ", ".join(f"d_{key}" for key, _ in initial_keys(model)))
    gradient = NumPyPrinter(adjoints.arrays)
    gradient_lines = [
        f"{statement.target.name} = {gradient(statement.value)}  # {statement.comment}"
        for statement in program.gradients.statements
    ]
    returns = [(key, str(gradient(value)), comment) for key, value, comment in program.returns]
    if ONES in gradient.used.arrays:
        arrays.append(Array(ONES, None, Steps.ONES))
        work.add(ONES)
    gradient_lines = bound(gradient.used, model, work, cache, viewed) + gradient_lines
    window = window_body(program, gradient.used.arrays, arrays)
    helpers_used = printer.used.helpers | gradient.used.helpers | window[1]
    return Backward(tuple(arrays), tuple(body), tuple(window[0]), tuple(gradient_lines), tuple(returns), helpers_used)


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


def allocation(arrays, first_steps=False, calls=NUMPY):
    """The body of _forward_arrays or _backward_arrays: empty arrays (calls: the library's), then the views
    of groups. first_steps: step 0 of the arrays of steps 0..T is zero (what the cache holds before the first step)."""
    printer = RowPrinter()
    entries, views = [], []
    for array in arrays:
        if array.steps is Steps.ONES:
            entries.append(f"    {quoted(array.name)}: {calls.line('ones', shape='T * B')},")
            continue
        entries.append(f"    {quoted(array.name)}: {calls.line('empty', shape=_shape(printer, array))},")
        if first_steps and array.steps is Steps.FROM_ZERO:
            views.append(f"work[{quoted(array.name)}][0] = 0")
        starts, offset = {}, sp.S.Zero
        for name, rows in array.members:
            starts[name] = (offset, offset + rows)
            views.append(
                f"work[{quoted(name)}] = work[{quoted(array.name)}][..., {_slice(printer, offset, offset + rows)}]"
            )
            offset += rows
        for name, first, count in array.spans:
            names = [m for m, _ in array.members[first : first + count]]
            start, stop = starts[names[0]][0], starts[names[-1]][1]
            views.append(f"work[{quoted(name)}] = work[{quoted(array.name)}][..., {_slice(printer, start, stop)}]")
    head = [f'{size_name(s)} = sizes["{s}"]' for s in sorted(printer.used.sizes)]
    return head + ["work = {"] + entries + ["}"] + views + ["return work"]


def _shape(printer, array):
    if isinstance(array.steps, PerCall):
        cols = array.steps.cols
        return f"({printer(array.rows)},)" if cols == 1 else f"({printer(array.rows)}, {printer(cols)})"
    steps = {Steps.FROM_ZERO: "T + 1, B, ", Steps.FROM_ONE: "T, B, ", Steps.ONE: "B, "}[array.steps]
    return f"({steps}{printer(array.rows)})"


def _slice(printer, start, stop):
    return f"{'' if start == 0 else printer(start)}:{printer(stop)}"
