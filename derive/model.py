"""The description of a recurrent model: one step of a cell at a generic time t.

A model is a list of assignments evaluated in order at step t:
intermediates and states (`a_t = b + W h_{t-1} + U x_t`, `h_t = tanh(a_t)`),
then outputs (`o_t = V h_t`), then a per-step loss l(o_t, y_t). States may
appear at t-1 (forward states) or at t+1 (reverse-time states, derive/direction.py) in the step,
and at t after their own assignment; every other sequence appears at t only. Several states
(LSTM's h and c) need nothing more.
"""

import copy
import functools
from dataclasses import dataclass, field, fields

import sympy as sp

from bptt.derive import blocks  # noqa: F401 (a slice out of range refused in words where the model writes it)
from bptt.derive.model_error import ModelError  # noqa: F401 (the model API's error, raised here)
from bptt.derive.nodes import Loss, SeqAt, references, t
from bptt.derive.norms import Norm, expand_norms
from bptt.derive.validation import validate

ROLES = ("input", "state", "intermediate", "output", "target", "label")


def sizes(names):
    """Dimension symbols, e.g. `d, h, q = sizes("d h q")`."""
    return sp.symbols(names, integer=True, positive=True)


def matrix(name, rows, cols):
    return sp.MatrixSymbol(name, rows, cols)


def vector(name, rows):
    return sp.MatrixSymbol(name, rows, 1)


@dataclass(frozen=True)
class Seq:
    """A named sequence of column vectors (or integer labels); call it with a time."""

    name: str
    rows: object
    role: str

    def __call__(self, time=t):
        return SeqAt(self.name, time, self.rows, self.role)


def sequence(name, rows, role):
    if role not in ROLES:
        raise ModelError(f"sequence {name!r}: role must be one of {', '.join(ROLES)}, got {role!r}")
    return Seq(name, sp.sympify(rows), role)


def labels(name, classes):
    """Integer labels in range(classes), one per step."""
    return Seq(name, sp.sympify(classes), "label")


@dataclass(frozen=True)
class Model:
    """One step of a recurrent cell, with its loss.

    steps:   ((Seq, rhs), ...) intermediates and states, in evaluation order
    outputs: ((Seq, rhs), ...) the loss inputs o_t, functions of states at t
    loss:    the per-step loss node, e.g. GenericLoss(o(t), y(t))
    mean:    True for L = (1/T) sum_t l_t, False for L = sum_t l_t
    code_loss: the concrete loss the generated code uses (defaults to loss)
    names:   ((Seq, expr), ...) display names, e.g. o_t = softmax(s_t)
    teacher_forcing: ((state Seq, expr), ...) in training the state's value at
             t >= 1 is this expression of the data (onehot(y_t)), not its equation
    """

    name: str
    title: str
    source: str
    sizes: tuple
    params: tuple
    inputs: tuple
    steps: tuple
    outputs: tuple
    loss: Loss
    mean: bool = False
    code_loss: Loss | None = None
    names: tuple = ()
    teacher_forcing: tuple = ()
    notes: tuple = field(default=())
    spec: str = ""  # how a user's file names it, `path.py:function` (set by models.load); "" for the zoo
    # ((sorted sum or product, its terms as written), ...): derive/written.py, set by models.load
    written: tuple = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        if any(rhs.has(Norm) for _, rhs in self.assignments if isinstance(rhs, sp.Basic)):  # its parts named
            taken = {seq.name for seq in _sequences(self)} | {getattr(p, "name", "") for p in self.params}
            steps, outputs = expand_norms(self.steps, self.outputs, sequence, taken)
            object.__setattr__(self, "steps", steps)
            object.__setattr__(self, "outputs", outputs)
        validate(self, _sequences(self))

    @property
    def command_name(self):
        """What `bptt latex` and `bptt codegen` take to reproduce this model."""
        return self.spec or self.name

    @property
    def states(self):
        return tuple(seq for seq, _ in self.steps if seq.role == "state")

    @property
    def intermediates(self):
        return tuple(seq for seq, _ in self.steps if seq.role == "intermediate")

    @property
    def assignments(self):
        """Every assignment of one step, in evaluation order."""
        return self.steps + self.outputs

    @property
    def forced(self):
        """States replaced by data under teacher forcing: {Seq: replacement}."""
        return dict(self.teacher_forcing)

    def sequences(self):
        """Every sequence the model reads or assigns, once each, in the order it first names them."""
        return _first_sequences(self)

    def concrete_loss(self):
        return self.code_loss if self.code_loss is not None else self.loss


def renamed(model, **changes):
    """dataclasses.replace(model, **changes) for changes that only give what the model names other names (its sizes,
    parameters and sequences, every equation the same but for them): valid as the model is, so not checked again
    (Model.__post_init__'s walks of every equation)."""
    unknown = set(changes) - {f.name for f in fields(model)}
    if unknown:
        raise TypeError(f"Model has no field {sorted(unknown)[0]!r}")
    other = copy.copy(model)  # (no __init__: no __post_init__)
    for name, value in changes.items():
        object.__setattr__(other, name, value)
    return other


@functools.lru_cache(maxsize=256)  # a walk of every equation, asked by each backend's name checks (a Model is a key,
# as validation's direction.sweeps already takes it)
def _first_sequences(model):
    first = {}
    for seq in _sequences(model):
        first.setdefault(seq.name, seq)
    return tuple(first.values())


def _sequences(model):
    """Every sequence the model reads or assigns, as declared (duplicates included)."""
    found = [seq for seq, _ in model.assignments] + list(model.inputs)
    for expr in [model.loss] + [rhs for _, rhs in model.assignments + model.teacher_forcing]:
        if isinstance(expr, sp.Basic):
            found += [Seq(ref.name, ref.rows, ref.role) for ref in references(expr)]
    return found
