"""What a backend's module.py.j2 lays out for one model: the NumPy backend's printed bodies and the facts
the fixed parts need. Each body is printed first, then the names it read are bound at its top."""

from dataclasses import dataclass

import sympy as sp

from bptt.codegen.ir import Array, adjoint_array
from bptt.codegen.printing.array_calls import NUMPY
from bptt.codegen.printing.bindings import bound, initial_keys, output_adjoint, quoted, sized, time_and_batch
from bptt.codegen.printing.checkpoints import hand_back
from bptt.codegen.printing.facts import Facts, fixed_helpers, model_facts
from bptt.codegen.printing.helpers import helpers
from bptt.codegen.printing.printer import ONES, RowPrinter, size_name
from bptt.codegen.printing.statements import NumPyPrinter
from bptt.codegen.printing.tangents import TangentPrinter
from bptt.codegen.printing.window import window_body
from bptt.codegen.program import build

SCAFFOLD = (  # the helpers the template's fixed parts call
    "_extent",
    "free_workspace",
    "clip_grads",
    "_workspace",
    "_truncation",
    "_keep_weights",
    "_check_dtype",
    "_check_sizes",
    "_check_params",
    "_check_cache",
    "_check_array",
)


@dataclass(frozen=True)
class Layout(Facts):
    """Everything module.py.j2 needs, typed; the *_lines fields are printed function bodies."""

    losses: str  # the per-step loss, code over all steps
    forward_arrays_lines: tuple
    backward_arrays_lines: tuple
    forward_lines: tuple
    adjoints_lines: tuple
    window_lines: tuple
    gradients_lines: tuple
    returns: tuple  # (key, code, comment)
    rtrl_lines: tuple
    imports: tuple
    helpers: str

    @property
    def adjoint_names(self):
        """What _adjoints returns: `d_c0, d_h0`."""
        return ", ".join(f"d_{name}" for name in self.state_names)


def layout(model, program=None):
    program = program or build(model)
    facts = model_facts(model, program, "NumPy")
    forward_arrays, forward_lines, forward_used = forward_body(program)
    backward = backward_bodies(program)
    rtrl = rtrl_body(program)
    losses = RowPrinter(stacked=True)
    losses_code = str(losses(model.concrete_loss()))
    used = forward_used | backward.helpers | rtrl.helpers | losses.used["helpers"] | fixed_helpers(model, SCAFFOLD)
    imports, source = helpers("numpy").source(sorted(used))
    return Layout(
        **facts,
        losses=losses_code,
        forward_arrays_lines=tuple(allocation(forward_arrays, first_steps=True)),
        backward_arrays_lines=tuple(allocation(backward.arrays)),
        forward_lines=tuple(forward_lines),
        adjoints_lines=tuple(backward.adjoints),
        window_lines=tuple(backward.window),
        gradients_lines=tuple(backward.gradients),
        returns=tuple(backward.returns),
        rtrl_lines=tuple(rtrl.lines),
        imports=tuple(imports),
        helpers=source,
    )


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
    return Body(tuple(head + lines), frozenset(printer.used["helpers"]))


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
    """(arrays, lines of _forward, helpers used): program.forward printed in place by printer_type, the
    NumPy printer or that printer with another library's calls (torch_printer.TorchStatements)."""
    model, forward = program.model, program.forward
    accepts_out = helpers(printer_type.backend).accepts_out
    printer = printer_type(forward.arrays, accepts_out, forward.stacks, model_names(model))
    lines = printer.lines(forward.statements)
    lines = [line for line, _ in printer.prepared.values()] + lines
    arrays = list(forward.arrays) + [a for _, a in printer.prepared.values()] + list(printer.scratch.arrays.values())
    used = printer.used
    head = [f"{p.name} = params[{quoted(p.name)}]" for p in model.params if p.name in used["params"]]
    head += [f"{a.name} = work[{quoted(a.name)}]" for a in _named(arrays) if a.name in used["arrays"]]
    head += sized(used["sizes"], model)
    first = model.inputs[0].name
    head += time_and_batch(used["sizes"], first)
    for seq in model.states:
        head.append(f"{seq.name}[0] = 0 if {seq.name}0 is None else {seq.name}0")
    return arrays, head + lines, used["helpers"]


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
    work = {a.name for a in _named(arrays)}
    cache = set(program.cache)
    body = bound(printer.used, model, work, cache)
    body += time_and_batch(printer.used["sizes"], output_adjoint(model)) + lines + initial
    body.append("return " + ", ".join(f"d_{key}" for key, _ in initial_keys(model)))
    gradient = NumPyPrinter(adjoints.arrays)
    gradient_lines = [
        f"{statement.target.name} = {gradient(statement.value)}  # {statement.comment}"
        for statement in program.gradients.statements
    ]
    returns = [(key, str(gradient(value)), comment) for key, value, comment in program.returns]
    if ONES in gradient.used["arrays"]:
        arrays.append(Array(ONES, None, "ones"))
        work.add(ONES)
    gradient_lines = bound(gradient.used, model, work, cache) + gradient_lines
    window = window_body(program, gradient.used["arrays"], arrays)
    helpers_used = printer.used["helpers"] | gradient.used["helpers"] | window[1]
    return Backward(tuple(arrays), tuple(body), tuple(window[0]), tuple(gradient_lines), tuple(returns), helpers_used)


def _named(arrays):
    """Every array by name, a group's members and spans as well (views of it)."""
    out = []
    for array in arrays:
        out.append(array)
        out += [Array(name, rows, array.steps) for name, rows in array.members]
        out += [Array(name, None, array.steps) for name, _, _ in array.spans]
    return out


def allocation(arrays, first_steps=False, calls=NUMPY):
    """The body of _forward_arrays or _backward_arrays: empty arrays (calls: the library's), then the views
    of groups. first_steps: step 0 of the arrays of steps 0..T is zero (what the cache holds before the first step)."""
    printer = RowPrinter()
    entries, views = [], []
    for array in arrays:
        if array.steps == "ones":
            entries.append(f"    {quoted(array.name)}: {calls.line('ones', shape='T * B')},")
            continue
        entries.append(f"    {quoted(array.name)}: {calls.line('empty', shape=_shape(printer, array))},")
        if first_steps and array.steps == "T+1":
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
    head = [f'{size_name(s)} = sizes["{s}"]' for s in sorted(printer.used["sizes"])]
    return head + ["work = {"] + entries + ["}"] + views + ["return work"]


def _shape(printer, array):
    if isinstance(array.steps, tuple):
        cols = array.steps[1]
        return f"({printer(array.rows)},)" if cols == 1 else f"({printer(array.rows)}, {printer(cols)})"
    steps = {"T+1": "T + 1, B, ", "T": "T, B, ", "": "B, "}[array.steps]
    return f"({steps}{printer(array.rows)})"


def _slice(printer, start, stop):
    return f"{'' if start == 0 else printer(start)}:{printer(stop)}"
