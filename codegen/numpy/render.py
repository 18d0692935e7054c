"""The NumPy backend's module (generated/<model>.py): its Layout, every piece decided here and placed by
this folder's template; the bodies are printing/layout.py's."""

import pathlib
from dataclasses import dataclass

from bptt.codegen.printing.checkpoints import scratch_rows
from bptt.codegen.printing.facts import model_facts
from bptt.codegen.printing.layout import STANDALONE, Layout, backward_bodies, forward_body, imported, rtrl_body
from bptt.codegen.printing.printer import RowPrinter
from bptt.codegen.printing.templates import environment
from bptt.codegen.printing.work import literal, step_rows, table, views
from bptt.codegen.printing.work import ones as ones_of
from bptt.codegen.program import NUMPY_PASSES, build

_env = environment(pathlib.Path(__file__).parent)

SCAFFOLD = ("_init_params", "free_workspace", "clip_grads", "_Spec", "_Passes")  # what the template calls
MATHS = ("_SPEC", "_forward", "_adjoints", "_window_adjoints", "_gradients")  # what a module hands its _Passes


@dataclass(frozen=True)
class NumPyLayout(Layout):
    """What numpy/module.py.j2 places; the *_lines fields are printed function bodies."""

    adjoints_lines: tuple
    window_lines: tuple
    gradients_lines: tuple
    returns: tuple  # (key, code, comment)


def module_source(model, program=None, standalone=False):
    """The source of generated/<model>.py; program: the model's statements (program.build's if None);
    standalone: the module carries the runtime it calls (else it imports bptt.runtime's)."""
    return _env.get_template("module.py.j2").render(m=layout(model, program, standalone), flag=STANDALONE[standalone])


def layout(model, program=None, standalone=False):
    program = program or build(model, NUMPY_PASSES)
    forward_arrays, forward_lines, forward_used, _ = forward_body(program)
    backward = backward_bodies(program)
    # held beside the derivation's arrays: the printer's scratch (the loss overwrites the outputs with dL/doutputs)
    held = scratch_rows(forward_arrays, program.forward.arrays), scratch_rows(backward.arrays, program.adjoints.arrays)
    facts = model_facts(model, program, "NumPy", held)
    rtrl = rtrl_body(program)
    losses = RowPrinter(stacked=True)
    losses_code = str(losses(model.concrete_loss()))
    used = forward_used | backward.helpers | rtrl.helpers | losses.used.helpers | set(SCAFFOLD) | {facts.loss_helper}
    tail = passes(facts, forward_arrays, backward.arrays, step_rows(program.checkpoints, held))
    imports, source = imported(used, "numpy", standalone=standalone, facts=tail)
    return NumPyLayout(
        facts=facts,
        checks=None,
        imports=imports,
        helpers=source,
        losses=losses_code,
        forward_lines=tuple(forward_lines),
        rtrl_lines=tuple(rtrl.lines),
        adjoints_lines=tuple(backward.adjoints),
        window_lines=tuple(backward.window),
        gradients_lines=tuple(backward.gradients),
        returns=tuple(backward.returns),
    )


def spec(facts):
    """The module's _Spec: its constants, and its data's rows (labels: their classes) and outputs' name."""
    data = {"xs": facts.input.rows, "ys": facts.target.rows, "outputs": facts.output.rows}
    labels = tuple(name for name, array in (("xs", facts.input), ("ys", facts.target)) if array.labels)
    return (
        f"_DATA = {literal(data)}  # the rows of a step of xs, ys and the outputs\n"
        "_SPEC = _Spec(PARAMS, SIZES, SHAPES, STATES, CACHE, MEAN, TEACHER_FORCED, _DATA,"
        f' labels={literal(labels)}, output="{facts.output.name}")'
    )


def passes(facts, forward_arrays, backward_arrays, rows):
    """The module's last lines: its _Spec and _Passes, what it hands the runtime: its maths, and the tables
    of its work arrays."""
    every = list(forward_arrays) + list(backward_arrays)
    work = {"forward_work": table(forward_arrays), "backward_work": table(backward_arrays)}
    work |= {"views": views(every)} if views(every) else {}
    entries = "".join(f"    {key}={literal(value, f'    {key}=')},\n" for key, value in work.items())
    ones = f"ones={literal(ones_of(backward_arrays))}, " if ones_of(backward_arrays) else ""
    return (
        f"{spec(facts)}\n_PASSES = _Passes({', '.join(MATHS)}, {facts.loss_helper},\n"
        f"{entries}    {ones}step_rows={literal(rows)},\n)"
    )
