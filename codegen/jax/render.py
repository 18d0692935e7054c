"""The JAX backend: what jax/module.py.j2 lays out for one model, printed from the statements
of codegen/program.py: the forward pass (program.forward, as the NumPy module computes it, written
functionally), the plain backward statements and the fast parameter gradients, with the recursions as
`jax.lax.scan`."""

import pathlib
from dataclasses import dataclass

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Array, Loop, Steps, walk
from bptt.codegen.jax import forward_mode as jax_forward_mode
from bptt.codegen.jax.arrays import value_arrays
from bptt.codegen.jax.forward import forward_lines, stack_lines
from bptt.codegen.jax.memory import XLA_STEP_FACTOR
from bptt.codegen.jax.printer import JaxPrinter, first_step_name
from bptt.codegen.jax.statements import backward_scan, initial_code, tupled
from bptt.codegen.printing import sweeps
from bptt.codegen.printing.bindings import params_bound, time_and_batch
from bptt.codegen.printing.checkpoints import input_rows
from bptt.codegen.printing.facts import model_facts
from bptt.codegen.printing.layout import STANDALONE, Layout, imported
from bptt.codegen.printing.printer import size_name
from bptt.codegen.printing.templates import environment
from bptt.codegen.printing.work import literal, spec, step_rows
from bptt.codegen.program import JAX_PASSES, build
from bptt.derive.atoms import atoms
from bptt.derive.direction import reverse_states
from bptt.derive.nodes import Adj

_env = environment(pathlib.Path(__file__).parent)
SCAFFOLD = ("_Spec", "_Passes", "clip_grads")  # what the template calls


IMPORTS = ("import functools", "import jax", "import jax.numpy as jnp")  # what the template's own code calls


@dataclass(frozen=True)
class JaxLayout(Layout):
    """What jax/module.py.j2 places; the *_lines fields are printed function bodies."""

    gradient_lines: tuple  # the body of _gradients_and_following

    in_framework = ", in JAX"
    option = " --backend jax"
    arrays_are = "Arrays are JAX arrays,"


def module_source(model, program=None, standalone=False):
    """The source of generated/<model>_jax.py; program: the model's statements (program.build's if None);
    standalone: the module carries the runtime it calls (else it imports bptt.runtime's). A model with
    reverse-time states: one module per group of its steps, composed (printing/sweeps.py)."""
    if program is None and reverse_states(model):
        return _env.get_template("sweeps.py.j2").render(m=sweeps.layout(model, module_source, "jax", standalone))
    return _env.get_template("module.py.j2").render(m=layout(model, program, standalone), flag=STANDALONE[standalone])


def layout(model, program=None, standalone=False):
    program = program or build(model, JAX_PASSES)
    facts = model_facts(model, program, "JAX")
    forward, forward_used = forward_body(program)
    gradients, gradients_used = gradient_body(program)
    rtrl, rtrl_used = rtrl_body(program)
    losses = JaxPrinter(stacked=True)
    losses_code = str(losses(model.concrete_loss()))
    used = forward_used | gradients_used | rtrl_used | losses.used.helpers | set(SCAFFOLD) | {facts.loss_helper}
    imports, source = imported(used, "jax", IMPORTS, standalone, passes(facts, program, model))
    return JaxLayout(
        facts=facts,
        imports=imports,
        helpers=source,
        losses=losses_code,
        forward_lines=tuple(forward),
        rtrl_lines=tuple(rtrl),
        gradient_lines=tuple(gradients),
    )


def passes(facts, program, model):
    """The module's last lines: its _Spec and _Passes, what it hands the runtime: its maths, and the rows of a
    step (held beside the derivation's arrays: the cache's copy of the inputs, a jitted function's outputs
    being new buffers, and dL/doutputs beside the outputs) with XLA's temporaries beside them, measured."""
    rows = step_rows(program.checkpoints, (input_rows(model), model.outputs[0][0].rows))
    return (
        f"{spec(facts)}\n_PASSES = _Passes(\n    _SPEC, _forward, _gradients_and_following, {facts.loss_helper},"
        f" step_rows={literal(rows)}, step_factor={XLA_STEP_FACTOR},\n)  # step_factor: measured, codegen/jax/memory.py"
    )


def forward_body(program):
    """(lines of _forward, helpers used): program.forward printed functionally (jax/scan.py)."""
    lines, printer = forward_lines(program)
    return bindings(program.model, printer.used, program.model.inputs[0].name) + lines, printer.used.helpers


def bindings(model, used, first, cache=()):
    """Lines binding the parameters, cache arrays, sizes, T, B and dtype a body reads (from the arrays' shapes)."""
    head = params_bound(used.params, model)
    head += [f'{name} = cache["{name}"]' for name in cache if name in used.arrays]
    for size in model.sizes:
        if str(size) in used.sizes:
            head.append(f"{size_name(size)} = {size_read(model, size)}")
    head += time_and_batch(used.sizes, first)
    if "dtype" in used.sizes:
        head.append(f'dtype = params["{model.params[0].name}"].dtype')
    return head


def size_read(model, size):
    """Code reading a size from a parameter's shape: an axis of that size, else one of a whole multiple of it
    (a block layout's 4h), divided."""
    axes = [(p, k, dim) for p in model.params for k, dim in enumerate(p.shape)]
    exact = next(((p, k) for p, k, dim in axes if dim == size), None)  # the first, found without SymPy's divisions
    if exact is not None:
        return f'params["{exact[0].name}"].shape[{exact[1]}]'
    ratios = [(p, k, dim / size) for p, k, dim in axes]  # 2*d / d is 2
    param, axis, times = min((e for e in ratios if e[2].is_Integer and e[2] > 0), key=lambda e: e[2] != 1)
    shape = f'params["{param.name}"].shape[{axis}]'
    return shape if times == 1 else f"{shape} // {times}"


def gradient_body(program):
    """(lines of _gradients after keep and ages are set, helpers used): the adjoints (the recursion as a
    reversed scan), dL/dS_0, then the parameter gradients as the NumPy module stacks them."""
    model = program.model
    statements = program.window.statements
    targets = {s.target.of.name: s.target.of for s in walk(statements) if isinstance(getattr(s, "target", None), Adj)}
    arrays = value_arrays(program.forward.arrays)  # the cache's, as the forward pass made them
    arrays |= {
        adjoint_array(name): Array(adjoint_array(name), seq.rows, Steps.FROM_ONE) for name, seq in targets.items()
    }
    groups = [a for a in program.adjoints.arrays if a.members]
    for group in groups:  # the gates' adjoints side by side, for one product per gradient
        arrays.update(
            {name: Array(name, None, Steps.FROM_ONE) for name in [group.name] + [span[0] for span in group.spans]}
        )
    gradient = JaxPrinter(stacked=True, arrays=arrays)
    gradient_lines = [gradient.gradient_line(s) for s in program.gradients.statements]
    returns = [f'"{key}": {gradient(value)},  # {comment}' for key, value, comment in program.returns]
    read = gradient.used.arrays
    scanned = [group for group in program.window.arrays if group.members] if _loop(statements) else []
    joined = joined_lines(gradient, groups, read, {group.name for group in scanned})
    printer = JaxPrinter(stacked=True, arrays=arrays)
    lines, local = [], set()
    read_before_loop = {a.of.name for s in statements if not isinstance(s, Loop) for a in atoms(s.value, Adj)}
    for statement in statements:
        if isinstance(statement, Loop):
            continue
        name = statement.target.of.name
        if isinstance(statement.value, sp.ZeroMatrix) and name in read_before_loop:  # an adjoint nothing reaches
            local.add(name)
            rows = printer(targets[name].rows)
            printer.used.sizes |= {"T", "B", "dtype"}
            lines.append(f"{adjoint_array(name)} = jnp.zeros((T, B, {rows}), dtype)  # {statement.comment}")
        elif not isinstance(statement.value, sp.ZeroMatrix):
            local.add(name)
            lines.append(f"{adjoint_array(name)} = {printer(statement.value)}  # {statement.comment}")
    loop = next((s for s in statements if isinstance(s, Loop)), None)
    initial_reads = sorted({a.of.name for i in program.window_initial for a in atoms(i.value, Adj)})  # in one order
    carried = []
    if loop is not None:
        crossings = {c.node: c.name for c in program.checkpoints.window_crossings}
        built = backward_scan(printer, loop, read, initial_reads, local, crossings, scanned)
        carried = built.carried
        following = printer.helper("_following")
        lines.append(f'keep_next = {following}(keep, following.get("keep"))  # keep[t], t = 1..T')
        rows = {built.rows[n] for n in carried}
        lines += [
            f"zero_{size_name(r)} = {zeros(printer, r)}  # nothing after step T"
            for r in sorted(rows, key=str)
            if r.is_Symbol
        ]
        first = [start(printer, c, built.rows, crossings) for c in built.scan.carry]
        doc = "One step t, last first: the adjoints at t+1 in, those at t out."
        lines += built.scan.lines(doc, first, reverse=True, last="carry")
        lines.append(f"{tupled([first_step_name(c.node) for c in built.scan.carry])} = carry  # the adjoints at step 1")
        lines.append(handed(printer, program.checkpoints.window_crossings, built.scan.carry))
        printer.used.sizes |= {str(size) for r in rows for size in r.free_symbols} | {"B", "dtype"}
    if any(item.weighted for item in program.window_initial):
        lines.append("keep_0 = keep[0]  # the weight of the flow from step 1 into step 0")
    lines += [initial_code(printer, item, carried) for item in program.window_initial]
    stacks = stack_lines(printer, program.window.stacks)
    used = printer.used | gradient.used
    head = bindings(model, used, f"d_{model.outputs[0][0].name}", program.cache)
    if loop is None:
        lines.append("handed = {}  # no flow through time")
    body = head + stacks + lines + joined + gradient_lines + ["return {"] + ["    " + r for r in returns]
    comments = {item.key: item.comment for item in program.window_initial}
    body += [f'    "{key}": d_{key},  # {comments[key]}' for key in (f"{seq.name}0" for seq in model.states)]
    return body + ["}, handed"], used.helpers


def _loop(statements):
    return any(isinstance(s, Loop) for s in statements)


def joined_lines(printer, groups, read, scanned):
    """Lines binding the gates' adjoints side by side that the gradients read (a group or a span of one), from
    their members; a group the backward scan binds is its output, and a span of it its rows. Marks what they read."""
    lines = []
    for group in groups:
        offsets = group.offsets()
        for name, first, count in ((group.name, 0, len(group.members)), *group.spans):
            members = [member for member, _ in group.members[first : first + count]]
            if name not in read or name in scanned:
                continue
            if group.name in scanned:
                start = offsets[members[0]][0]
                rows = printer.span(start, start + sum(offsets[m][1] for m in members), group.rows)
                lines.append(f"{name} = {group.name}[..., {rows}]  # the gates' adjoints side by side")
                read.add(group.name)
            else:
                parts = ", ".join(members)
                lines.append(f"{name} = jnp.concatenate(({parts}), axis=-1)  # the gates' adjoints side by side")
                read |= set(members)
    return lines


def zeros(printer, rows):
    """A carried adjoint's zeros after step T (at age 0 in a window)."""
    return f"{printer.helper('_fresh')}(jnp.zeros((B, {printer(rows)}), dtype), ages)"


def start(printer, carried, rows, crossings):
    """A carried adjoint's value after step T: the next segment's at its step 1 if there is one, else zero
    (`zero_n_h`, bound once for every adjoint of h rows; a group's, of 4h rows, in place)."""
    size = rows[carried.node.of.name]
    zero = f"zero_{size_name(size)}" if size.is_Symbol else zeros(printer, size)
    if carried.node in crossings:
        return f'following.get("{crossings[carried.node]}", {zero})'
    return zero


def handed(printer, crossings, carry):
    """`handed = {...}`: this segment's values at step 1 that step T of the segment before it reads (the
    adjoints carried from the final carry; the values, and the adjoints computed before the scan, from their
    arrays)."""
    at_one = {c.node.of.name: first_step_name(c.node) for c in carry}
    items = []
    for c in crossings:
        carried = isinstance(c.first, Adj) and c.first.of.name in at_one
        code = at_one[c.first.of.name] if carried else printer.at(False)(c.first)
        items.append(f'"{c.name}": {code}')
    return f"handed = {{{', '.join(items)}}}  # step 1's values, for the segment before this one"


def rtrl_body(program):
    """(lines of _forward_mode after the loss, helpers used): the Program's forward-mode statements as scans."""
    model = program.model
    lines, printer = jax_forward_mode.rtrl_lines(program)
    output = f"d_{model.outputs[0][0].name}"
    head = bindings(model, printer.used, output, program.cache[1:])  # the input is an argument
    return head + ["grads = {}"] + lines + ["return loss, grads"], printer.used.helpers
