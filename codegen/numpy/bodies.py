"""The NumPy backend's own bodies of its module (numpy/module.py.j2): full BPTT's adjoints and gradients printed
in place (printing/statements.py), window truncation's plain statements with an age axis (printing/window.py),
and forward mode's loop (printing/tangents.py); the forward pass's body is shared with torch
(printing/layout.py:forward_body). Each body is printed first, then the names it read are bound at its top."""

from dataclasses import dataclass

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Array, Steps
from bptt.codegen.printing.bindings import bound, initial_keys, output_adjoint, quoted, time_and_batch
from bptt.codegen.printing.checkpoints import hand_back
from bptt.codegen.printing.helpers import helpers
from bptt.codegen.printing.layout import every_array, model_names, views
from bptt.codegen.printing.products import ONES
from bptt.codegen.printing.statements import InPlacePrinter
from bptt.codegen.printing.tangents import TangentPrinter
from bptt.codegen.printing.window import WindowPrinter, adjoint_seqs, reads_aged


@dataclass(frozen=True)
class Body:
    lines: tuple
    helpers: frozenset


def rtrl_body(program):
    """The body of forward_mode_grads after its checks: the Program's forward-mode statements."""
    model = program.model
    printer = TangentPrinter(stacked=False)
    lines = printer.lines(program.forward_mode.statements)
    head = bound(printer.used, model, set(), program.cache)
    first = output_adjoint(model)
    head += [f"T, B = {first}.shape[0], {first}.shape[1]", "grads = {}"]
    return Body(tuple(head + lines), frozenset(printer.used.helpers))


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
    printer = InPlacePrinter(adjoints.arrays, helpers("numpy").accepts_out, adjoints.stacks, model_names(model))
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
    cache = program.cache
    viewed = views(arrays)
    body = bound(printer.used, model, work, cache, viewed)
    body += time_and_batch(printer.used.sizes, output_adjoint(model)) + lines + initial
    body.append("return " + ", ".join(f"d_{key}" for key, _ in initial_keys(model)))
    gradient = InPlacePrinter(adjoints.arrays)
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


def window_body(program, read_by_gradients, fast_arrays):
    """(lines of _window_adjoints, helpers used): aged arrays, the plain statements, then the
    arrays the gradients read written into the workspace."""
    model = program.model
    printer = WindowPrinter(program.recurrent)
    lines = printer.lines(program.window.statements)
    initial = [printer.initial(i, bool(reads_aged(i.value, program.recurrent))) for i in program.window_initial]
    targets = [s for s in adjoint_seqs(program.window.statements)]
    allocate = []
    for seq in targets:
        ages = "ages, " if seq.name in program.recurrent else ""
        allocate.append(f"{adjoint_array(seq.name)} = np.zeros((T + 1, {ages}B, {printer._print(seq.rows)}), dtype)")
    wanted = _members(read_by_gradients, fast_arrays)
    write = []
    for seq in targets:
        name = adjoint_array(seq.name)
        if name in wanted:
            write.append(
                f"np.sum({name}, axis=1, out=work[{quoted(name)}])"
                if seq.name in program.recurrent
                else f'work["{name}"][...] = {name}'
            )
    used = printer.used
    used.sizes |= {str(seq.rows) for seq in targets}
    head = bound(used, model, set(), program.cache)
    first = output_adjoint(model)
    head += [f"T, B = {first}.shape[0], {first}.shape[1]", f"dtype = {first}.dtype"]
    if program.recurrent:
        head.append("ages = k + 1  # how many steps back a gradient may have flowed")
    ret = "return " + ", ".join(f"d_{key}" for key, _ in initial_keys(model))
    back = hand_back(printer, program.checkpoints.window_crossings)
    return head + allocate + lines + initial + write + back + [ret], used.helpers


def _members(names, arrays):
    """The names, with each group or span replaced by its members."""
    out = set(names)
    for array in arrays:
        if array.name in names or any(span[0] in names for span in array.spans):
            out |= {name for name, _ in array.members}
    return out
