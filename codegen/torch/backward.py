"""The torch module's backward pass from program.build's statements: the adjoints (the fast statements,
with keep weights when truncating; the plain ones with an age axis for window truncation), then the
parameter gradients as derived, one product over all steps each."""


from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Array, Steps, walk
from bptt.codegen.printing.bindings import Printed, output_adjoint
from bptt.codegen.printing.checkpoints import hand_back
from bptt.codegen.printing.code import tuple_items
from bptt.codegen.printing.printer import PrintError, size_name
from bptt.codegen.printing.window import adjoint_seqs, reads_aged
from bptt.codegen.text import text
from bptt.codegen.torch.printer import AdjointPrinter, TorchPrinter
from bptt.derive.nodes import SeqAt


def window_body(program, reads):
    """The body of _window_adjoints(k, ...), from the plain statements: zero adjoint tensors (an age axis
    for those that flow through time), the statements, dL/dS_0; returns ({adjoint name: tensor} for the
    names in reads, summed over the ages, (dL/dS_0, ...))."""
    printer = AdjointPrinter(program.recurrent, window=True)
    statements = program.window.statements
    body = printer.lines(statements)
    initial = [printer.initial(i, bool(reads_aged(i.value, program.recurrent))) for i in program.window_initial]
    seqs = adjoint_seqs(statements)
    aged = {seq.name for seq in seqs if seq.name in program.recurrent}
    zeros = []
    for seq in seqs:
        printer.used.sizes |= {"T", "B", str(seq.rows)}
        ages = "ages, " if seq.name in aged else ""
        shape = f"(T + 1, {ages}B, {size_name(seq.rows)})"
        zeros.append(f"{adjoint_array(seq.name)} = torch.zeros({shape}, dtype=dtype, device=device)")
    head = ["ages = k + 1  # how many steps back a gradient may have flowed"] if aged else []
    names = window_reads(program, reads, {adjoint_array(name) for name in aged})
    keys = ", ".join(f"d_{i.key}" for i in program.window_initial) + ("," if len(program.window_initial) == 1 else "")
    tail = hand_back(printer, program.checkpoints.window_crossings) + [f"return {{{names}}}, ({keys})"]
    used = printer.used
    arrays = frozenset(used.arrays) - {adjoint_array(seq.name) for seq in seqs} - {output_adjoint(program.model)}
    return Printed.of(head + zeros + body + initial + tail, used, arrays)


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
    """The body of _adjoints(keep, ...) from the fast statements (optimize.backward): slopes computed for
    all steps before the loop, the flows of gates that share an operand as one product with their weights
    stacked (ir.Stack), their adjoints views of one tensor. reads: the adjoints _gradients reads."""
    adjoints = program.adjoints
    slopes = {s.target.name for s in walk(adjoints.statements) if isinstance(getattr(s, "target", None), SeqAt)}
    table = {}
    for array in adjoints.arrays:
        steps = Steps.FROM_ONE if array.name in slopes else array.steps  # slopes hold steps 1..T
        table[array.name] = Array(array.name, array.rows, steps)
        table.update({name: Array(name, rows, steps) for name, rows in array.members})
        table.update({name: Array(name, None, steps) for name, _, _ in array.spans})
    missing = set(reads) - set(table)
    if missing:
        raise PrintError(f"the fast adjoints do not hold {', '.join(sorted(missing))}")
    printer = AdjointPrinter((), window=False)
    printer.arrays = table
    body = printer.lines(adjoints.statements)
    initial = [printer.initial(i, False) for i in program.initial]
    stacks = [stack_line(printer, stack) for stack in adjoints.stacks if stack.name in printer.used.params]
    zeros, views = [], []
    for array in adjoints.arrays:
        if array.name in slopes:
            continue
        printer.used.sizes |= {"T", "B"}
        zeros.append(f"{array.name} = torch.zeros((T + 1, B, {printer(array.rows)}), dtype=dtype, device=device)")
        starts = array.offsets()
        for name, _ in array.members:
            first, count = starts[name]
            views.append(f"{name} = {array.name}[..., {span(printer, first, first + count)}]")
        for name, first, count in array.spans:
            members = [member for member, _ in array.members[first : first + count]]
            views.append(f"{name} = {array.name}[..., {span(printer, starts[members[0]][0], sum(starts[members[-1]]))}]")
    names = ", ".join(f'"{name}": {name}' for name in sorted(reads))
    keys = ", ".join(f"d_{i.key}" for i in program.initial) + ("," if len(program.initial) == 1 else "")
    initial += hand_back(printer, program.checkpoints.crossings)
    lines = stacks + zeros + views + body + initial + [f"return {{{names}}}, ({keys})"]
    used = printer.used
    arrays = frozenset(used.arrays) - set(table) - {output_adjoint(program.model)}
    return Printed.of(lines, used, arrays)


def stack_line(printer, stack):
    """name = the parts stacked along their rows (ir.Stack), once per call."""
    parts = tuple_items(printer(part) for part in stack.parts)
    return f"{stack.name} = torch.cat(({parts}))  # {', '.join(text(part) for part in stack.parts)} stacked"


def span(printer, start, stop):
    return f"{'' if start == 0 else printer(start)}:{printer(stop)}"
