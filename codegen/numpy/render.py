"""The NumPy backend's module (generated/<model>.py): its Layout, every piece decided here and placed by
this folder's template; the bodies are printing/layout.py's and this folder's bodies.py's."""

import pathlib
from dataclasses import dataclass

from bptt.codegen.numpy.bodies import backward_bodies, rtrl_body
from bptt.codegen.printing.checkpoints import scratch_rows
from bptt.codegen.printing.checks import CheckStyle, checks, from_shape, target_checks
from bptt.codegen.printing.facts import fixed_helpers, model_facts
from bptt.codegen.printing.layout import SPEC, STANDALONE, Layout, allocation, forward_body, imported
from bptt.codegen.printing.printer import RowPrinter
from bptt.codegen.printing.templates import environment
from bptt.codegen.program import NUMPY_PASSES, build

_env = environment(pathlib.Path(__file__).parent)

SCAFFOLD = (  # the helpers the template's fixed parts call
    "_init_params",
    "free_workspace",
    "clip_grads",
    "_truncation",
    "_check_dtype",
    "_check_sizes",
    "_check_params",
    "_check_cache",
    "_check_array",
    "_Spec",
    "_Passes",
)

STYLE = CheckStyle(
    device=False,
    batch=(),
    no_state="None",
    draw_labels="{name} = rng.integers(0, {rows}, size=(T, B))",
    draw_floats="{name} = rng.standard_normal((T, B, {rows})).astype(dtype)",
)


@dataclass(frozen=True)
class NumPyLayout(Layout):
    """What numpy/module.py.j2 places; the *_lines fields are printed function bodies."""

    forward_arrays_lines: tuple
    backward_arrays_lines: tuple
    adjoints_lines: tuple
    window_lines: tuple
    gradients_lines: tuple
    returns: tuple  # (key, code, comment)
    output_gradient_lines: tuple  # _loss_and_output_gradient's, between the forward pass and the loss
    adjoint_names: str  # what _adjoints returns: `d_c0, d_h0`
    forward_target: str  # what forward's pass reads of the targets: y when teacher-forced, else None


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
    used = forward_used | backward.helpers | rtrl.helpers | losses.used.helpers | fixed_helpers(model, SCAFFOLD)
    imports, source = imported(used, "numpy", standalone=standalone, facts=passes(facts))
    return NumPyLayout(
        facts=facts,
        checks=checks(facts, STYLE),
        imports=imports,
        helpers=source,
        losses=losses_code,
        forward_lines=tuple(forward_lines),
        rtrl_lines=tuple(rtrl.lines),
        forward_arrays_lines=tuple(allocation(forward_arrays, first_steps=True)),
        backward_arrays_lines=tuple(allocation(backward.arrays)),
        adjoints_lines=tuple(backward.adjoints),
        window_lines=tuple(backward.window),
        gradients_lines=tuple(backward.gradients),
        returns=tuple(backward.returns),
        output_gradient_lines=output_gradient_lines(facts),
        adjoint_names=", ".join(f"d_{name}" for name in facts.state_names),
        forward_target=facts.target.name if facts.forced else "None",
    )


def output_gradient_lines(facts):
    """What _loss_and_output_gradient does between the forward pass and the loss: bind the loss's count,
    check the targets against the outputs' shape (teacher-forced ones were checked by forward)."""
    s, y = facts.output, facts.target
    lines = [from_shape(facts.count_sizes, s.name)]
    lines += [f"dtype = {s.name}.dtype"] if not facts.forced and not y.labels else []
    lines += target_checks(facts, STYLE, f'dict(zip(("T", "B", "{s.rows}"), {s.name}.shape, strict=True))')
    return tuple(lines + ([f"{y.name} = ys"] if facts.forced else []))


def passes(facts):
    """The module's last lines: its _Spec and _Passes, what it hands the runtime."""
    named = {"output": f'"{facts.output.name}"', "forced": str(bool(facts.forced)), "forward": "_forward"}
    named |= {"forward_arrays": "_forward_arrays", "backward_into": "_backward_into"}
    named |= {"backward_arrays": "_backward_arrays", "loss": facts.loss_helper, "mean": str(facts.mean)}
    named |= {"checkpoint_bytes": "_checkpoint_bytes"}
    return f"{SPEC}\n_PASSES = _Passes(_SPEC, {', '.join(f'{key}={value}' for key, value in named.items())})"
