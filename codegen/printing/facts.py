"""What every backend's module template says of a model, whatever the backend prints: its equations,
parameters, sizes, states, cache, loss and the helpers its fixed parts call."""

from dataclasses import dataclass

from bptt.codegen.printing.checkpoints import bytes_lines
from bptt.codegen.printing.printer import PrintError
from bptt.codegen.program import shape_of
from bptt.codegen.text import equation, text
from bptt.derive.nodes import SoftmaxCrossEntropy, SquaredError

LOSSES = {SoftmaxCrossEntropy: "_softmax_cross_entropy", SquaredError: "_squared_error"}  # the loss's helper


@dataclass(frozen=True)
class Facts:
    """The part of every backend's Layout that says what the model is; a backend's Layout adds its printed bodies."""

    model: object
    equations: tuple
    loss_text: str
    params: tuple  # (name, shape as size names)
    sizes: tuple
    states: tuple  # (name, size name)
    forced: tuple
    cache: tuple  # (name, dims)
    input: object  # the input Seq
    output: object  # the output Seq
    target: object  # the target Seq (or labels)
    loss_helper: str
    checkpoint_bytes: tuple  # the body of _checkpoint_bytes (printing/checkpoints.py)

    @property
    def teacher(self):
        return bool(self.forced)

    @property
    def state_names(self):
        return tuple(f"{name}0" for name, _ in self.states)


def model_facts(model, program, backend):
    """The Layout fields every backend shares, as a dict; a loss with no helper is a PrintError."""
    loss = model.concrete_loss()
    if type(loss) not in LOSSES:
        raise PrintError(f"no {backend} form for the loss {type(loss).__name__}; give the model a concrete code_loss")
    return dict(
        model=model,
        equations=tuple(equation(seq(), rhs) for seq, rhs in model.assignments),
        loss_text=text(loss),
        params=tuple((p.name, shape_of(p)) for p in model.params),
        sizes=tuple(str(s) for s in model.sizes),
        states=tuple((seq.name, str(seq.rows)) for seq in model.states),
        forced=tuple(seq.name for seq in model.forced),
        cache=cache_dims(model, program.cache),
        input=model.inputs[0],
        output=model.outputs[0][0],
        target=loss.target,
        loss_helper=LOSSES[type(loss)],
        checkpoint_bytes=tuple(bytes_lines(program.checkpoints, model)),
    )


SHARED = ("_check_lengths", "_float_dtype")  # what every backend's template calls (random_inputs, losses)
SHARED += ("_checkpointed", "_segmented")  # loss_and_grads and backward with checkpoints


def fixed_helpers(model, scaffold):
    """The helpers the template's fixed parts call: its scaffold, the loss's, and the label check if any."""
    loss = model.concrete_loss()
    labels = model.inputs[0].role == "label" or loss.target.role == "label" or model.teacher_forcing
    return set(scaffold) | set(SHARED) | {LOSSES[type(loss)]} | ({"_check_labels"} if labels else set())


def cache_dims(model, names):
    """(name, dims) of what forward keeps: the input, then sequences of T+1 steps."""
    seqs = {seq.name: seq for seq in model.inputs + model.states + model.intermediates}
    first = model.inputs[0]
    dims = [(first.name, ("T", "B") if first.role == "label" else ("T", "B", str(first.rows)))]
    return tuple(dims + [(name, ("T+1", "B", str(seqs[name].rows))) for name in names[1:]])
