"""The torch backend: what torch/module.py.j2 lays out for one model (generated/<model>_torch.py).

The module computes what the NumPy module computes, from the same statements (program.build), printed
by torch/printer.py: the forward pass (program.forward) in place as the NumPy module computes it, under
torch.no_grad(), the backward pass the derived BPTT, and around them a torch.autograd.Function and an
nn.Module that train with any torch optimiser."""

import pathlib
from dataclasses import dataclass

from bptt.codegen.printing import sweeps
from bptt.codegen.printing.bindings import grouped, order, output_adjoint, params_bound, sized, time_and_batch
from bptt.codegen.printing.checkpoints import scratch_rows
from bptt.codegen.printing.facts import model_facts
from bptt.codegen.printing.layout import STANDALONE, Layout, forward_body, imported
from bptt.codegen.printing.templates import environment
from bptt.codegen.printing.work import passes, step_rows
from bptt.codegen.program import TORCH_PASSES, build
from bptt.codegen.torch.backward import fast_adjoints_body, gradients_body, window_body
from bptt.codegen.torch.printer import TorchPrinter
from bptt.codegen.torch.rtrl import rtrl_body
from bptt.codegen.torch.statements import TorchStatements
from bptt.derive.direction import reverse_states

_env = environment(pathlib.Path(__file__).parent)
SCAFFOLD = ("_Spec", "_Passes", "clip_grads", "_autograd", "XS_REQUIRES_GRAD")  # what the template calls


@dataclass(frozen=True)
class TorchLayout(Layout):
    """What torch/module.py.j2 places; the *_lines fields are printed function bodies (fresh tensors each
    call: no workspace is kept)."""

    adjoints_lines: tuple
    window_lines: tuple
    gradients_lines: tuple
    returns: tuple  # (key, code, comment)

    in_framework = ", in PyTorch"
    option = " --backend torch"
    arrays_are = "Tensors are"
    array = "tensor"


def module_source(model, program=None, standalone=False):
    """The source of generated/<model>_torch.py; program: the model's statements (program.build's if None);
    standalone: the module carries the runtime it calls (else it imports bptt.runtime's). A model with
    reverse-time states: one module per group of its steps, composed (printing/sweeps.py)."""
    if program is None and reverse_states(model):
        groups = sweeps.layout(model, module_source, "torch", standalone, ("_Sweeps", "_sweeps_model"))
        return _env.get_template("sweeps.py.j2").render(m=groups)
    return _env.get_template("module.py.j2").render(m=layout(model, program, standalone), flag=STANDALONE[standalone])


def layout(model, program=None, standalone=False):
    """The torch module's Layout: the forward pass as the NumPy module's, the backward as torch/backward.py's."""
    program = program or build(model, TORCH_PASSES)
    forward = forward_body(program, TorchStatements, grouped_work=True)
    forward_arrays, forward_lines, forward_helpers, forward_printer = forward
    gradients, returns, reads = gradients_body(program)
    (full, backward_arrays, adjoints_steps), window = fast_adjoints_body(program, reads), window_body(program, reads)
    # held beside the derivation's arrays: the printer's scratch, and dL/doutputs, a tensor beside the outputs
    forward_held = scratch_rows(forward_arrays, program.forward.arrays)
    backward_held = scratch_rows(backward_arrays, program.adjoints.arrays) + model.outputs[0][0].rows
    facts = model_facts(model, program, "torch")
    dy = output_adjoint(model)
    rtrl = rtrl_body(program)
    losses = TorchPrinter(stacked=True)
    losses_code = str(losses(model.concrete_loss()))
    used = set(SCAFFOLD) | {facts.loss_helper} | losses.used.helpers | rtrl.helpers | forward_helpers
    for body in (full, window, gradients):
        used |= body.helpers
    rows = step_rows(program.checkpoints, (forward_held, backward_held))
    tail = passes(facts, forward_arrays, backward_arrays, rows)
    imports, source = imported(used, "torch", ("import torch",), standalone, tail)
    cache = set(program.cache)
    return TorchLayout(
        facts=facts,
        imports=imports,
        helpers=with_steps(source, forward_printer.step_functions + adjoints_steps),
        losses=losses_code,
        forward_lines=tuple(forward_lines),
        rtrl_lines=rtrl.lines,
        adjoints_lines=full.lines,
        window_lines=adjoints_lines(model, window, cache),
        gradients_lines=tuple(
            bind(model, gradients, sources(gradients, cache) | dict.fromkeys(reads, "adjoints"), dy)
            + list(gradients.lines)
        ),
        returns=returns,
    )


def with_steps(helpers, functions):
    """The helpers' source, then the loops' step functions for compile=True (torch/steps.py), if any."""
    return "\n\n\n".join([helpers, *("\n".join(function.lines()) for function in functions)])


def bind(model, body, sources, shaped):
    """The lines that bind what a body reads: parameters, arrays from their dicts, sizes, T and B from
    the shape of the array `shaped`."""
    head = params_bound(body.params, model)
    names = sorted(sources, key=lambda n: (order(model)(n), n))
    for source in dict.fromkeys(sources[name] for name in names):  # each dict's, in the order of its first
        head += grouped([name for name in names if sources[name] == source], source)
    return head + sized(body.sizes, model, grouped=True) + time_and_batch(body.sizes, shaped)


def sources(body, cache):
    return {name: "cache" for name in body.arrays & cache}


def adjoints_lines(model, body, cache):
    """The body of _adjoints or _window_adjoints: bindings, the adjoint tensors' dtype and device, the statements."""
    dy = output_adjoint(model)
    return tuple(
        bind(model, body, sources(body, cache), dy) + [f"dtype, device = {dy}.dtype, {dy}.device"] + list(body.lines)
    )
