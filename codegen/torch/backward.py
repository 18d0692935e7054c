"""The torch module's backward pass from program.build's statements: the adjoints (the fast statements in
place, with keep weights when truncating; the plain ones with an age axis for window truncation), then the
parameter gradients as derived, one product over all steps each."""

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.names import shown
from bptt.codegen.printing.bindings import Printed, bound, output_adjoint, time_and_batch
from bptt.codegen.printing.breaking import STEP
from bptt.codegen.printing.checkpoints import hand_back
from bptt.codegen.printing.columns import WIDTH
from bptt.codegen.printing.helpers import helpers
from bptt.codegen.printing.layout import every_array, model_names, views
from bptt.codegen.printing.printer import PrintError
from bptt.codegen.printing.window import adjoint_seqs, reads_aged
from bptt.codegen.torch.printer import TorchPrinter, WindowAdjointPrinter
from bptt.codegen.torch.statements import TorchStatements
from bptt.codegen.torch.sums import WEIGHTS


def window_body(program, reads):
    """The body of _window_adjoints(k, ...), from the plain statements: zero adjoint tensors (an age axis
    for those that flow through time), the statements, dL/dS_0; returns ({adjoint name: tensor} for the
    names in reads, summed over the ages, (dL/dS_0, ...))."""
    printer = WindowAdjointPrinter(program.recurrent)
    statements = program.window.statements
    body = printer.lines(statements)
    initial = [printer.initial(i, bool(reads_aged(i.value, program.recurrent))) for i in program.window_initial]
    seqs = adjoint_seqs(statements)
    aged = {seq.name for seq in seqs if seq.name in program.recurrent}
    shapes = {}  # the adjoints of one shape, as the rows of one tensor of zeros
    for seq in seqs:
        printer.used.sizes |= {"T", "B"}
        ages = "ages, " if seq.name in aged else ""
        shapes.setdefault(f"T + 1, {ages}B, {printer._print(seq.rows)}", []).append(adjoint_array(seq.name))
    zeros = [line for shape, names in shapes.items() for line in zeros_of(names, shape)]
    head = ["ages = k + 1  # how many steps back a gradient may have flowed"] if aged else []
    names = window_reads(program, reads, {adjoint_array(name) for name in aged})
    keys = ", ".join(f"d_{i.key}" for i in program.window_initial) + ("," if len(program.window_initial) == 1 else "")
    tail = hand_back(printer, program.checkpoints.window_crossings) + [f"return {{{names}}}, ({keys})"]
    used = printer.used
    arrays = frozenset(used.arrays) - {adjoint_array(seq.name) for seq in seqs} - {output_adjoint(program.model)}
    return Printed.of(head + zeros + body + initial + tail, used, arrays)


def zeros_of(names, shape):
    """Zero tensors of one shape: one tensor, its rows unpacked when there are several (as many tensors as
    keep each unpacking, in a function's body, within WIDTH columns up to the call's bracket)."""
    if len(names) == 1:
        return [f"{names[0]} = torch.zeros(({shape}), dtype=dtype, device=device)"]
    lines, chunk = [], []
    for name in names:
        if chunk and len(shown(", ".join([*chunk, name]) + STEP + " = torch.zeros(")) > WIDTH:
            lines += zeros_of(chunk, shape)
            chunk = []
        chunk.append(name)
    if len(chunk) == 1:
        return lines + zeros_of(chunk, shape)
    return lines + [f"{', '.join(chunk)} = torch.zeros(({len(chunk)}, {shape}), dtype=dtype, device=device)"]


def gradients_body(program):
    """The parameter gradients from the adjoints (program.gradients and returns: the gates' gradients as one
    product over all steps, each parameter's its rows of it). Returns (Printed whose lines are the products,
    (key, code, comment) per gradient, the adjoint arrays read)."""
    printer = TorchPrinter(stacked=True)
    lines = [f"{s.target.name} = {printer(s.value)}  # {s.comment}" for s in program.gradients.statements]
    # a gate's rows of a gradient product would share the product's storage with the other gates' rows
    returns = tuple((key, str(printer(value)), comment) for key, value, comment in program.owned_returns)
    adjoints = set()
    for array in program.adjoints.arrays:
        adjoints |= {array.name} | {name for name, _ in array.members} | {name for name, _, _ in array.spans}
    used = printer.used
    read = frozenset(used.arrays)
    body = Printed.of(lines, used, read)
    return body, returns, sorted(read & adjoints)


def window_reads(program, reads, aged):
    """What _window_adjoints returns for each adjoint array the gradients read: a group or a span of
    the fast pass as its members side by side, each summed over its ages."""
    members = {}
    for array in program.adjoints.arrays:
        names = [name for name, _ in array.members]
        if len(names) > 1:
            members[array.name] = names
            members.update({span: names[first : first + count] for span, first, count in array.spans})
    out = []
    for name in reads:
        parts = [part + (".sum(1)" if part in aged else "") for part in members.get(name, [name])]
        out.append(f'"{name}": ' + (f"torch.cat(({', '.join(parts)}), -1)" if len(parts) > 1 else parts[0]))
    return ", ".join(out)


def fast_adjoints_body(program, reads):
    """The body of _adjoints(keep, ...) from the backward passes of SHARED_PASSES, printed in place as the
    NumPy module prints them (TorchStatements) into the tensors of work (made from their dims): slopes for all
    steps before the loop, the flows of gates that share an operand one product with their weights stacked, each
    step's sums in place (torch/sums.py), and each step for compile=True (torch/steps.py). reads: the
    adjoints _gradients reads. Returns (Printed, the arrays of work, the loop's StepFunctions)."""
    model, adjoints = program.model, program.adjoints
    printer = TorchStatements(adjoints.arrays, helpers("torch").accepts_out, adjoints.stacks, model_names(model))
    body = printer.lines(adjoints.statements)
    at_step = printer.at(False)
    initial = []
    for item in program.initial:
        code = str(at_step(item.value))
        code = f"{printer.helper('_weighted')}(keep, 0, {code})" if item.weighted else code
        initial.append(f"d_{item.key} = {code}  # {item.comment}")
    initial += hand_back(printer, program.checkpoints.crossings)
    arrays = list(adjoints.arrays) + [a for _, a in printer.prepared.values()] + list(printer.scratch.arrays.values())
    work = {array.name for array in every_array(arrays)}
    missing = set(reads) - work
    if missing:
        raise PrintError(f"the fast adjoints do not hold {', '.join(sorted(missing))}")
    used = printer.used
    used.arrays |= set(reads)
    dy = output_adjoint(model)
    weighted = "_flow_weights" in used.helpers  # its line reads T
    head = time_and_batch(set(used.sizes) | ({"T"} if weighted else set()), dy)  # work: made by the runtime
    head += bound(used, model, work, program.cache, views(arrays))
    head += [f"{WEIGHTS} = _flow_weights(keep, T)"] if weighted else []
    returned = ", ".join(f'"{name}": {name}' for name in sorted(reads))
    keys = ", ".join(f"d_{i.key}" for i in program.initial) + ("," if len(program.initial) == 1 else "")
    prepared = [line for line, _ in printer.prepared.values()]
    lines = head + prepared + body + initial + [f"return {{{returned}}}, ({keys})"]
    return Printed.of(lines, used), arrays, printer.step_functions
