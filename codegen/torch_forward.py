"""The torch module's forward pass: plain, differentiable statements (torch autograd of them is the
reference the derived backward is proven against), fast where it costs nothing in clarity.

Values that read no state of the previous step are computed for all steps at once (one matmul over
the (T*B, k) rows); in the recursion the part of each sum that reads no value of the loop (the input
projection W x_t + b) is hoisted out of it likewise (optimize.hoist). The loop appends each step's
values to lists (no in-place writes, so autograd can differentiate it), stacked after the loop.
"""

from dataclasses import dataclass

from bptt.derive.nodes import SeqAt, matrix_sum, t

from . import fuse, optimize
from .ir import Array
from .numpy_bindings import Printed
from .numpy_printer import ALIGNED, size_name
from .program import forward_steps
from .text import text
from .torch_printer import TorchPrinter, substitute


def forward_body(model, cached):
    """The statements of _forward(params, sizes, x[, y], h0..., dtype): the cache's sequences and the outputs."""
    steps = forward_steps(model, cached)
    hoisted, inside = optimize.hoist(steps.loop, steps.loop_names, set())
    printer = TorchPrinter(stacked=True)
    lines = [stacked_line(printer, s.target, s.value, s.comment) for s in steps.forced + steps.before]
    inputs = {}
    for statement in hoisted:
        seq = statement.target
        inputs[seq.name] = SeqAt(f"_{seq.name}_in", t, seq.rows, "input")
        lines.append(f"{inputs[seq.name].name} = {printer(statement.value)}  # {statement.comment}")
    if steps.loop:
        lines += loop_lines(printer, [s.target for s in steps.loop], inside, inputs)
    lines += [stacked_line(printer, s.target, s.value, s.comment) for s in steps.after]
    used = printer.used
    return Printed.of(lines, used)


def stacked_line(printer, seq, value, comment):
    """seq for all steps at once; a sequence of steps 0..T gets its step 0 first (the initial state, or zero)."""
    code = printer(value)
    if seq.role in ALIGNED:
        first = f"{seq.name}0" if seq.role == "state" else "None"
        code = f"{printer.helper('_prepend')}({first}, {code})"
    return f"{seq.name} = {code}  # {comment}"


def loop_lines(printer, seqs, inside, inputs):
    """The recursion: a list per sequence (step 0 first for steps 0..T), one append per step, then stacked.
    Gates that read products of the same operand get them from one product per step (gate_groups)."""
    lines = []
    for seq in seqs:
        if seq.role in ALIGNED:
            printer.used["sizes"] |= {"B", str(seq.rows)}
            zero = f"torch.zeros((B, {size_name(seq.rows)}), dtype=dtype, device=device)"
            first = f"{zero} if {seq.name}0 is None else {seq.name}0" if seq.role == "state" else zero
            lines.append(f"{seq.name} = [{first}]")
        else:
            lines.append(f"{seq.name} = []")
    step = printer.at(False)
    printer.used["sizes"].add("T")
    fused, first_members = {}, {}
    for group in gate_groups(inside, inputs):
        lines += group_lines(printer, group, inputs)
        printer.arrays.update({local.name: Array(local.name, local.rows, "") for local in group.locals})
        first_members[group.members[0][0].target.name] = group
        fused.update({statement.target.name: local for (statement, _, term), local in zip(group.members, group.locals, strict=True)})
    loop = []
    for statement in inside:
        seq = statement.target
        if seq.name in first_members:
            loop += step_lines(step, first_members[seq.name])
        if seq.name in fused:
            value = fused_value(statement, inputs, fused[seq.name])
        else:
            value = substitute(statement.value, seq, inputs[seq.name]) if seq.name in inputs else statement.value
        loop.append(f"{seq.name}.append({step(value)})  # {statement.comment}")
    lines.append("for t in range(1, T + 1):")
    lines += ["    " + line for line in loop]
    lines += [f"{seq.name} = torch.stack({seq.name})" for seq in seqs]
    return lines


@dataclass(frozen=True)
class Group:
    """Gates whose sums read P_k v for one operand v at t-1: one product [P_1; P_2; ...] v per step,
    added to the gates' inputs stacked (`name`_in, steps 1..T), then split into a local per gate."""

    name: str
    operand: object
    members: tuple  # (statement, P, the term P v)
    locals: tuple  # the SeqAt each gate's share prints as (one step)
    inputs: str  # what the gates add to the product: "steps" (T, B, rows), "vector" (biases only) or ""


def gate_groups(inside, inputs):
    found = {}
    for statement in inside:
        products = [(term, *fuse.product(term)) for term in fuse.sum_terms(statement.value)[1]]
        products = [(term, matrix, v) for term, matrix, v in products if matrix is not None and v.time == t - 1]
        if len(products) == 1:
            term, matrix, operand = products[0]
            found.setdefault(operand, []).append((statement, matrix, term))
    groups = []
    for operand, members in found.items():
        if len(members) > 1:
            name = fuse.internal(statement.target.name for statement, _, _ in members)
            locals_ = tuple(SeqAt(f"_{s.target.name}_t", t, s.target.rows, "intermediate") for s, _, _ in members)
            statements = [s for s, _, _ in members]
            if any(s.target.name in inputs for s in statements):
                kind = "steps"
            else:
                kind = "vector" if any(fixed_terms(s, inputs) for s in statements) else ""
            groups.append(Group(name, operand, tuple(members), locals_, kind))
    return groups


def group_lines(printer, group, inputs):
    """Before the loop: the stacked weights, and the gates' inputs side by side (zero for a gate without)."""
    weights = ", ".join(str(printer(matrix)) for _, matrix, _ in group.members)
    shown = "; ".join(text(matrix) for _, matrix, _ in group.members)
    lines = [f"{group.name}_weights = torch.cat(({weights}))  # [{shown}], stacked once"]
    parts = []
    for statement, _, _ in group.members:
        fixed = fixed_terms(statement, inputs)
        parts.append(str(printer(matrix_sum(fixed))) if fixed else "torch.zeros((), dtype=dtype, device=device)")
    if group.inputs:
        stacked = f"torch.cat(torch.broadcast_tensors({', '.join(parts)}), -1)"
        lines.append(f"{group.name}_in = {stacked}  # their inputs" + (", all steps" if group.inputs == "steps" else ""))
    return lines


def fixed_terms(statement, inputs):
    """The terms of a gate's sum computed before the loop: its hoisted input, or the terms that read no value."""
    seq = statement.target
    if seq.name in inputs:
        return [inputs[seq.name]]
    return [term for term in fuse.sum_terms(statement.value)[1] if not term.atoms(SeqAt)]


def step_lines(step, group):
    """At each step: the gates' inputs plus [P_1; P_2; ...] v, split into one local per gate."""
    sizes = ", ".join(str(step(statement.target.rows)) for statement, _, _ in group.members)
    operand = step(group.operand)
    names = ", ".join(local.name for local in group.locals)
    shown = "; ".join(text(matrix) for _, matrix, _ in group.members)
    weights = f"{group.name}_weights.T"
    if group.inputs:
        inputs = f"{group.name}_in" + ("[t - 1]" if group.inputs == "steps" else "")
        product = f"torch.addmm({inputs}, {operand}, {weights})"
    else:
        product = f"({operand} @ {weights})"
    return [f"{names} = {product}.split(({sizes}), -1)  # [{shown}] {text(group.operand)}: every gate at once"]


def fused_value(statement, inputs, local):
    """A gate's value with its input and its product replaced by its share of the fused product."""
    seq = statement.target
    rebuild, terms = fuse.sum_terms(statement.value)
    fixed = fixed_terms(statement, inputs)
    kept = [term for term in terms if term != seq and term not in fixed and fuse.product(term)[0] is None]
    return rebuild(matrix_sum([local] + kept))
