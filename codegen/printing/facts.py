"""What every backend's module says of a model, whatever the backend prints, decided here so that the
templates only place it: its names, equations, parameters, sizes, states, cache and loss, as the
docstrings, signatures and constants write them, and the helpers its fixed parts call."""

from dataclasses import dataclass

from bptt.codegen.ir import Steps
from bptt.codegen.printing.code import unspecified_loss
from bptt.codegen.program import shape_of
from bptt.derive.nodes import SoftmaxCrossEntropy, SquaredError
from bptt.derive.text import equation, text

LOSSES = {SoftmaxCrossEntropy: "_softmax_cross_entropy", SquaredError: "_squared_error"}  # the loss's helper


@dataclass(frozen=True)
class Array:
    """A sequence the fixed parts check or draw: its name in code, its rows (or classes), whether it holds labels."""

    name: str
    rows: str
    labels: bool


@dataclass(frozen=True)
class Facts:
    """The model as every backend's module.py.j2 writes it. Strings are code or text to place as they are."""

    title: str
    command: str  # the model's name on the command line
    source: str
    equations: tuple  # one line of text per step equation
    loss_text: str  # l_t: 1/2 ||o_t - y_t||^2
    sum_text: str  # how the steps' losses combine: "(1/T) sum_t" or "sum_t"
    padded_text: str  # how a padded batch's sequence's steps combine (lengths=): its own steps' sum or mean
    mean: bool
    loss_helper: str
    params: tuple  # (name, shape as size names)
    params_text: str  # "W (h, h), b (h)"
    sizes: tuple
    states: tuple  # (name, size name)
    state_names: tuple  # the initial states' arguments: h0, c0
    forced: tuple
    cache: tuple  # (name, dims, comment)
    input: Array
    output: Array
    target: Array
    xs_text: str  # xs as the docstrings describe it: "(T, B, d)", or labels
    ys_text: str
    forcing_text: str  # "" or ", with teacher forcing: ..." (forward's docstring)
    initial_states: str  # "initial state" or "initial states"
    forced_ys: str  # the data arguments after xs in forward's signature: "" or ", ys"
    forced_target: str  # the same, as the checked arrays: "" or ", y"
    data_names: str  # the data a derived gradient leaves out: "xs" or "xs or ys"

    @property
    def state_args(self):
        return "".join(f", {name}" for name in self.state_names)

    @property
    def states_tuple(self):
        """The initial states as a tuple: `(h0,)`, `(h0, c0)`."""
        return f"({', '.join(self.state_names)}{',' * (len(self.state_names) == 1)})"

    @property
    def forward_targets(self):
        """The targets a Function's forward pass takes: ys when teacher-forced (it reads them), else None."""
        return "ys" if self.forced else "None"

    @property
    def state_defaults(self):
        return "".join(f", {name}=None" for name in self.state_names)


def model_facts(model, program, backend):
    """The model's Facts; a loss with no helper is a PrintError."""
    loss = model.concrete_loss()
    if type(loss) not in LOSSES:
        raise unspecified_loss(loss)
    first, output, target = (_array(seq) for seq in (model.inputs[0], model.outputs[0][0], loss.target))
    forced = tuple(seq.name for seq in model.forced)
    forcing = ", with teacher forcing: the targets ys take the place of\n    " + "".join(f"{n}_t" for n in forced)
    return Facts(
        title=model.title,
        command=model.command_name,
        source=model.source,
        equations=tuple(equation(seq(), rhs) for seq, rhs in model.assignments),
        loss_text=text(loss),
        sum_text="(1/T) sum_t" if model.mean else "sum_t",
        padded_text="the mean of its own steps" if model.mean else "sums its own steps",
        mean=model.mean,
        loss_helper=LOSSES[type(loss)],
        params=tuple((p.name, shape_of(p)) for p in model.params),
        params_text=", ".join(f"{p.name} ({', '.join(shape_of(p))})" for p in model.params),
        sizes=tuple(str(s) for s in model.sizes),
        states=tuple((seq.name, str(seq.rows)) for seq in model.states),
        state_names=tuple(f"{seq.name}0" for seq in model.states),
        forced=forced,
        cache=cache_dims(model, program.cache, program.forward.arrays),
        input=first,
        output=output,
        target=target,
        xs_text=f"(T, B) integer indices in range({first.rows})" if first.labels else f"(T, B, {first.rows})",
        ys_text=f"(T, B) integer labels in range({target.rows})" if target.labels else f"(T, B, {target.rows})",
        forcing_text=f"{forcing} for t >= 1" if forced else "",
        initial_states="initial states" if len(model.states) > 1 else "initial state",
        forced_ys=", ys" if forced else "",
        forced_target=f", {target.name}" if forced else "",
        data_names="xs or ys" if forced else "xs",
    )


def _array(seq):
    return Array(seq.name, str(seq.rows), seq.role == "label")


def cache_dims(model, names, arrays=()):
    """(name, dims, comment) of what forward keeps: the input, then sequences of T+1 steps, or of steps 1..T
    where the forward pass's array (ir.Array, of arrays) holds only those."""
    seqs = {seq.name: seq for seq in model.inputs + model.states + model.intermediates}
    stepped = {name for a in arrays if a.steps is Steps.FROM_ONE for name in [a.name, *(m for m, _ in a.members)]}
    steps = {name: "T" if name in stepped else "T+1" for name in names[1:]}
    note = "; T: steps 1..T" if "T" in steps.values() else ""
    first = model.inputs[0]
    if first.role == "label":
        dims = [(first.name, ("T", "B"), f"{note}; {first.name}: integer labels")]
    else:
        dims = [(first.name, ("T", "B", str(first.rows)), note)]
    return tuple(dims + [(name, (steps[name], "B", str(seqs[name].rows)), "") for name in names[1:]])
