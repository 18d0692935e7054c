"""The JAX module's _forward: program.forward printed by jax/scan.py's PassPrinter, between the stacked weights
and the outputs and cache it returns."""

from bptt.codegen.jax.scan import PassPrinter
from bptt.codegen.printing.code import tuple_items


def forward_lines(program):
    """(lines of _forward after its bindings, the printer): the arrays of steps 0..T as zeros with the
    initial states at step 0, the stacked weights, the statements, then the outputs and the cache."""
    model, forward = program.model, program.forward
    printer = PassPrinter(forward.arrays)
    printer.hold_steps({seq.name for seq in model.states})
    body = printer.lines(forward.statements)
    body += [printer.complete(home) for home in list(printer.initial)]
    printer.pending = []
    output = printer.view(model.outputs[0][0].name, printer.places[model.outputs[0][0].name].home)
    cache = ", ".join(f'"{name}": {cached(printer, name)}' for name in program.cache)
    tail = printer.pending + [f"return {output}, {{{cache}}}"]
    return stack_lines(printer, forward.stacks) + body + tail, printer


def cached(printer, name):
    """The code of a cached sequence's whole array (the input as it came)."""
    if name not in printer.places:
        return name
    return printer.view(name, printer.places[name].home)


def stack_lines(printer, stacks):
    """name = the parts stacked along their rows (ir.Stack), for the stacks the statements read."""
    lines = []
    for stack in stacks:
        if stack.name in printer.used.params:
            parts = tuple_items(printer(part) for part in stack.parts)
            lines.append(f"{stack.name} = jnp.concatenate(({parts}))  # stacked once per call")
    return lines
