"""Turn a model's derivation into the statements of its NumPy module.

Only the recursions loop over time. Everything else (input projections,
outputs, local adjoint terms, parameter gradients) is one stacked
expression over all steps.
"""

import re
from dataclasses import dataclass

import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.nodes import Adj, SeqAt, matrix_sum, t

from .forward_mode import blocks
from .numpy_printer import RowPrinter, param_gradient, per_step_loss, size_name
from .schedule import backward_schedule, forward_schedule
from .text import equation, text

STEP, ALL = RowPrinter(stacked=False), RowPrinter(stacked=True)


@dataclass(frozen=True)
class Line:
    code: str
    comment: str = ""
    guarded: bool = False  # only for t < T


def _terms(expr):
    return list(expr.args) if isinstance(expr, sp.MatAdd) else [expr]


def hoist(seq, rhs, loop_names):
    """Precompute, for all steps at once, the terms of the first sum in rhs that
    read nothing computed in the loop (input projections, biases).

    Returns (rhs with those terms replaced by the placeholder `<name>_in`, the hoisted Line or None).
    """

    def in_loop(expr):
        return bool({r.name for r in expr.atoms(SeqAt)} & loop_names)

    for node in sp.preorder_traversal(rhs):
        if isinstance(node, sp.MatAdd):
            fixed = [term for term in node.args if not in_loop(term)]
            moving = [term for term in node.args if in_loop(term)]
            if moving and any(term.atoms(SeqAt) for term in fixed):  # constants and biases stay in place
                placeholder = SeqAt(f"{seq.name}_in", t, seq.rows, "input")
                line = Line(
                    f"{placeholder.name} = {ALL(matrix_sum(fixed))}", f"{text(matrix_sum(fixed))}, all steps at once"
                )
                return rhs.xreplace({node: sp.MatAdd(placeholder, *moving)}), line
    return rhs, None


def _stacked(seq, rhs):
    target = f"{seq.name}[1:]" if seq.role in ("state", "intermediate") else seq.name
    return Line(f"{target} = {ALL(rhs)}", equation(seq(), rhs))


def forward_lines(model):
    """(before the loop, inside the loop, after the loop) statements of the forward pass."""
    before, loop, after = forward_schedule(model)
    before_lines = [_stacked(seq, replacement) for seq, replacement in model.teacher_forcing]
    before_lines += [_stacked(seq, rhs) for seq, rhs in before]
    loop_names = {seq.name for seq, _ in loop}
    inside = []
    for seq, rhs in loop:
        stepwise, hoisted = hoist(seq, rhs, loop_names)
        if hoisted:
            before_lines.append(hoisted)
        inside.append(Line(f"{seq.name}[t] = {STEP(stepwise)}", equation(seq(), rhs)))
    return before_lines, inside, [_stacked(seq, rhs) for seq, rhs in after]


def backward_lines(derivation):
    """(before the loop, inside the loop) statements computing the adjoints, last step first.

    Arrays of recurrent adjoints carry an age axis (how many steps the gradient
    has flowed back; one age unless truncating by window): local terms enter at
    age 0, the next step's flow arrives through `_age` weighted by `keep[t]`.
    """
    order, parts, recurrent = backward_schedule(derivation)
    before, inside = [], []
    for seq in sorted(order, key=lambda s: s.name in recurrent):  # stable: non-recurrent first
        local, _, _ = parts[seq]
        if local:
            aged = seq.name in recurrent
            comment = f"{text(Adj(seq()))} = {text(matrix_sum(local))}" + (" + ..." if aged else "")
            before.append(Line(f"d_{seq.name}[1:{', 0' if aged else ''}] = {ALL(matrix_sum(local))}", comment))
    for seq in order:
        local, stepwise, nxt = parts[seq]
        target, name = f"d_{seq.name}", text(Adj(seq()))
        if stepwise:
            op = "+=" if local else "="
            inside.append(
                Line(f"{target}[t] {op} {STEP(matrix_sum(stepwise))}", f"{name} {op} {text(matrix_sum(stepwise))}")
            )
        if nxt:
            code = f"{target}[t] += _age(keep[t] * ({STEP(matrix_sum(nxt))}), window)"
            inside.append(Line(code, f"{name} += {text(matrix_sum(nxt))}", True))
    return before, inside, sorted(recurrent)


def gradient_lines(derivation, recurrent):
    """Parameter gradients (stacked) and initial-state gradients, as (key, code, comment)."""
    model = derivation.model
    out = []
    for param in model.params:
        total = derivation.param_gradient(param)
        code = " + ".join(param_gradient(term, ALL) for term in _terms(total.body))
        out.append((param.name, code, f"dL/d{param.name} = {text(total)}"))
    initial = []
    for seq in model.states:
        value = derivation.initial(seq)
        code = STEP(value)
        if {a.of.name for a in value.atoms(Adj)} & set(recurrent):
            # the flow into a live initial state is one step older and truncated like the others
            code = f"_age(keep[0] * ({code}), window)" if seq not in model.forced else f"({code})"
            code += ".sum(axis=0)"
        initial.append((f"{seq.name}0", code, f"dL/d{seq.name}_0 = {text(value)}"))
    return out, initial


def loss_lines(model):
    """Code for the batch-averaged loss and for dL/d(outputs) of that loss."""
    loss = model.concrete_loss()
    derivation = derive(model, loss=loss)
    per_step = per_step_loss(loss, ALL)
    adjoints = [
        (f"d_{seq.name}", f"({ALL(value)}) / B", f"{text(Adj(seq()))} = {text(value)}")
        for seq, value in derivation.output_adjoints.items()
    ]
    return per_step, adjoints


def shape_of(matrix):
    """Size names of a parameter's shape: ('h', 'd'), or ('h',) for a vector."""
    rows, cols = matrix.shape
    return (str(rows),) if cols == 1 else (str(rows), str(cols))


def allocations(seqs, prefix="", aged=()):
    """Zeroed arrays for steps 0..T; those named in `aged` get an age axis."""
    return [
        Line(
            f"{prefix}{seq.name} = np.zeros((T + 1, {'ages, ' if seq.name in aged else ''}B, {size_name(seq.rows)}), dtype)"
        )
        for seq in seqs
    ]


def used(names, lines):
    """The names that some line's code mentions, in their original order."""
    code = "\n".join(line if isinstance(line, str) else line.code for line in lines)
    return [name for name in names if re.search(rf"\b{re.escape(name)}\b", code)]


def context(model):
    """Everything the module template needs."""
    derivation = derive(model, named="all", loss=model.concrete_loss())
    forward_before, forward_loop, forward_after = forward_lines(model)
    forward_before = allocations(model.intermediates) + forward_before
    backward_before, backward_loop, recurrent = backward_lines(derivation)
    adjoint_arrays = [seq for seq in model.states + model.intermediates if seq not in model.forced]
    backward_before = allocations(adjoint_arrays, "d_", recurrent) + backward_before
    gradients, initial_gradients = gradient_lines(derivation, recurrent)
    loss_code, output_adjoints = loss_lines(model)
    target = model.concrete_loss().target
    size_vars = [size_name(s) for s in model.sizes]
    param_names = [p.name for p in model.params]
    forward_all = forward_before + forward_loop + forward_after + allocations(model.states)
    backward_all = backward_before + backward_loop + [code for _, code, _ in gradients + initial_gradients]
    adjoint_codes = [code for _, code, _ in output_adjoints]
    output_size = size_name(model.outputs[0][0].rows)
    if set(used(size_vars, adjoint_codes)) - {output_size}:
        raise ValueError(f"model {model.name!r}: the loss gradient may only use the output size {output_size}")
    cached = [seq.name for seq in model.states + model.intermediates]
    rtrl = blocks(model)
    rtrl_all = [line for b in rtrl for line in b.setup + b.step + (b.outputs, b.size, b.key)]
    return {
        "rtrl": rtrl,
        "rtrl_params": used(param_names, rtrl_all),
        "rtrl_cache": used([model.inputs[0].name] + cached, rtrl_all),
        "rtrl_sizes": used(size_vars, rtrl_all),
        "forward_sizes": used(size_vars, forward_all),
        "backward_sizes": used(size_vars, backward_all),
        "backward_params": used(param_names, backward_all),
        "backward_cache": used([model.inputs[0].name] + cached, backward_all),
        "loss_sizes": used([output_size], adjoint_codes),
        "model": model,
        "module": model.name.replace("-", "_"),
        "params": [(p.name, shape_of(p)) for p in model.params],
        "sizes": [str(s) for s in model.sizes],
        "inputs": model.inputs,
        "states": model.states,
        "teacher": bool(model.teacher_forcing),
        "input": model.inputs[0].name,
        "forced": list(model.forced),
        "forced_names": [seq.name for seq in model.forced],
        "intermediates": model.intermediates,
        "outputs": [seq for seq, _ in model.outputs],
        "target": target,
        "equations": [equation(seq(), rhs) for seq, rhs in model.assignments],
        "loss_text": text(model.concrete_loss()),
        "forward_before": forward_before,
        "forward_loop": forward_loop,
        "forward_after": forward_after,
        "backward_before": backward_before,
        "backward_loop": backward_loop,
        "gradients": gradients,
        "initial_gradients": initial_gradients,
        "recurrent": used([f"d_{name}" for name in recurrent], [code for _, code, _ in gradients]),
        "loss_code": loss_code,
        "output_adjoints": output_adjoints,
        "time": t,
    }
