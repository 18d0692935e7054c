"""The NumPy backend's module (generated/<model>.py): its Layout, every piece decided here and placed by
this folder's template; the bodies are printing/layout.py's and this folder's bodies.py's."""

import pathlib
from dataclasses import dataclass

from bptt.codegen.numpy.bodies import backward_bodies, rtrl_body
from bptt.codegen.printing import sweeps
from bptt.codegen.printing.checkpoints import scratch_rows
from bptt.codegen.printing.facts import model_facts
from bptt.codegen.printing.layout import STANDALONE, Layout, forward_body, imported
from bptt.codegen.printing.printer import RowPrinter
from bptt.codegen.printing.templates import environment
from bptt.codegen.printing.work import passes, step_rows
from bptt.codegen.program import NUMPY_PASSES, build
from bptt.derive.direction import reverse_states

_env = environment(pathlib.Path(__file__).parent)

SCAFFOLD = ("_init_params", "free_workspace", "clip_grads", "_Spec", "_Passes")  # what the template calls


@dataclass(frozen=True)
class NumPyLayout(Layout):
    """What numpy/module.py.j2 places; the *_lines fields are printed function bodies."""

    adjoints_lines: tuple
    window_lines: tuple
    gradients_lines: tuple
    returns: tuple  # (key, code, comment)


def module_source(model, program=None, standalone=False):
    """The source of generated/<model>.py; program: the model's statements (program.build's if None);
    standalone: the module carries the runtime it calls (else it imports bptt.runtime's). A model with
    reverse-time states: one module per group of its steps, composed (printing/sweeps.py)."""
    if program is None and reverse_states(model):
        return _env.get_template("sweeps.py.j2").render(
            m=sweeps.layout(model, module_source, "numpy", standalone, shells_call=("_init_params",))
        )
    return _env.get_template("module.py.j2").render(m=layout(model, program, standalone), flag=STANDALONE[standalone])


def layout(model, program=None, standalone=False):
    program = program or build(model, NUMPY_PASSES)
    forward_arrays, forward_lines, forward_used, _ = forward_body(program)
    backward = backward_bodies(program)
    # held beside the derivation's arrays: the printer's scratch (the loss overwrites the outputs with dL/doutputs)
    held = scratch_rows(forward_arrays, program.forward.arrays), scratch_rows(backward.arrays, program.adjoints.arrays)
    facts = model_facts(model, program, "NumPy")
    rtrl = rtrl_body(program)
    losses = RowPrinter(stacked=True)
    losses_code = str(losses(model.concrete_loss()))
    used = forward_used | backward.helpers | rtrl.helpers | losses.used.helpers | set(SCAFFOLD) | {facts.loss_helper}
    tail = passes(facts, forward_arrays, backward.arrays, step_rows(program.checkpoints, held))
    imports, source = imported(used, "numpy", standalone=standalone, facts=tail)
    return NumPyLayout(
        facts=facts,
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
