"""The description of a recurrent model: one step of a cell at a generic time t.

A model is a list of assignments evaluated in order at step t:
intermediates and states (`a_t = b + W h_{t-1} + U x_t`, `h_t = tanh(a_t)`),
then outputs (`o_t = V h_t`), then a per-step loss l(o_t, y_t). States may
appear at t-1 (forward states) or at t+1 (reverse-time states, derive/direction.py) in the step,
and at t after their own assignment; every other sequence appears at t only. Several states
(LSTM's h and c) need nothing more.
"""

import keyword
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

import sympy as sp

from bptt.derive.direction import DirectionError, sweeps
from bptt.derive.elementwise import FUNCTIONS
from bptt.derive.model_error import ModelError  # noqa: F401 (the model API's error, raised here)
from bptt.derive.nodes import Loss, SeqAt, t
from bptt.derive.norms import Norm, expand_norms
from bptt.derive.text import notation

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

    def __post_init__(self):
        if any(rhs.has(Norm) for _, rhs in self.assignments if isinstance(rhs, sp.Basic)):  # its parts named
            taken = {seq.name for seq in _sequences(self)} | {getattr(p, "name", "") for p in self.params}
            steps, outputs = expand_norms(self.steps, self.outputs, sequence, taken)
            object.__setattr__(self, "steps", steps)
            object.__setattr__(self, "outputs", outputs)
        validate(self)

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
        first = {}
        for seq in _sequences(self):
            first.setdefault(seq.name, seq)
        return tuple(first.values())

    def concrete_loss(self):
        return self.code_loss if self.code_loss is not None else self.loss


def references(expr):
    """The sequence values an expression reads, sorted for determinism."""
    return sorted(expr.atoms(SeqAt), key=sp.default_sort_key)


def validate(model):
    """Raise ModelError naming the first thing wrong with a model description."""
    where = f"model {model.name!r}"
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", str(model.name)):
        raise ModelError(f"{where}: a name must be letters, digits, '-' and '_', starting with a letter")
    if not model.states:
        raise ModelError(f"{where}: no state; a recurrent model needs a step with role 'state'")
    if not model.outputs:
        raise ModelError(f"{where}: no output; give at least one (Seq, rhs) in outputs")
    if not isinstance(model.loss, Loss):
        raise ModelError(f"{where}: loss must be a loss node such as GenericLoss(o(t), y(t)), got {_shown(model.loss)}")
    if len(model.inputs) != 1:
        raise ModelError(f"{where}: expected one input sequence, got {len(model.inputs)}")
    _check_names(where, model)
    params = set(model.params)
    known_now = {s.name for s in model.inputs}
    states = {s.name for s in model.states}
    for seq, rhs in model.assignments:
        expected = "output" if (seq, rhs) in model.outputs else ("state", "intermediate")
        if seq.role not in expected:
            raise ModelError(f"{where}: {seq.name} is assigned in the wrong place for role {seq.role!r}")
        _check_elementwise(where, seq, rhs)
        _check_inner_shapes(where, seq, rhs)
        if rhs.shape != (seq.rows, 1):
            raise ModelError(f"{where}: {seq.name}_t has {seq.rows} rows but its right-hand side has shape {rhs.shape}")
        for ref in references(rhs):
            _check_reference(where, seq, ref, known_now, states)
        for symbol in rhs.atoms(sp.MatrixSymbol):
            if symbol not in params:
                raise ModelError(f"{where}: {symbol} in the equation of {seq.name}_t is not a parameter")
        known_now.add(seq.name)
    try:
        sweeps(model)
    except DirectionError as error:
        raise ModelError(f"{where}: {error}") from None
    for seq, replacement in model.teacher_forcing:
        if seq not in model.states:
            raise ModelError(f"{where}: teacher forcing replaces {seq.name}, which is not a state")
        if replacement.shape != (seq.rows, 1) or any(
            r.role not in ("target", "label", "input") for r in references(replacement)
        ):
            raise ModelError(f"{where}: teacher forcing must replace {seq.name}_t by data of shape ({seq.rows}, 1)")


def _check_names(where, model):
    """Each size, parameter and sequence is named once, by a name Python reads as written; every dimension
    is a size (or a multiple of one, as 4*h). The names the generated code itself uses are codegen's to
    refuse (bptt.codegen.names), as it writes the code."""
    if not isinstance(model.sizes, tuple) or not all(isinstance(s, sp.Symbol) for s in model.sizes):
        raise ModelError(f"{where}: sizes must be a tuple of size symbols, e.g. sizes('d h q'), got {model.sizes!r}")
    if not isinstance(model.params, tuple) or not all(isinstance(p, sp.MatrixSymbol) for p in model.params):
        raise ModelError(f"{where}: params must be a tuple of matrix(...) and vector(...), got {model.params!r}")
    for kind, things in (("size", model.sizes), ("parameter", model.params)):
        for name, count in Counter(thing.name for thing in things).items():
            _check_identifier(where, name)
            if count > 1:
                raise ModelError(f"{where}: the {kind} {name!r} is listed {count} times; list each {kind} once")
    sequences = _check_sequences(where, model)
    for param in model.params:
        if param.name in sequences:
            raise ModelError(f"{where}: {param.name!r} names a parameter and a sequence; give each its own name")
        for dim in param.shape if param.shape[1] != 1 else param.shape[:1]:  # a vector's columns: 1
            _check_dimension(where, param.name, dim, model.sizes)
    for name, seq in sequences.items():
        _check_dimension(where, name, seq.rows, model.sizes)


def _check_sequences(where, model):
    """{name: Seq}: one sequence per name, each assigned at most once."""
    sequences = {}
    for seq in _sequences(model):
        _check_identifier(where, seq.name)
        if sequences.setdefault(seq.name, seq) != seq:
            first = sequences[seq.name]
            raise ModelError(
                f"{where}: two sequences are named {seq.name!r} ({first.role} of {first.rows} rows and {seq.role} of "
                f"{seq.rows} rows); give each its own name"
            )
    for name, count in Counter(seq.name for seq, _ in model.assignments).items():
        if count > 1:
            raise ModelError(f"{where}: the sequence {name!r} is assigned {count} times; assign each sequence once")
    return sequences


def _sequences(model):
    """Every sequence the model reads or assigns, as declared (duplicates included)."""
    found = [seq for seq, _ in model.assignments] + list(model.inputs)
    for expr in [model.loss] + [rhs for _, rhs in model.assignments + model.teacher_forcing]:
        if isinstance(expr, sp.Basic):
            found += [Seq(ref.name, ref.rows, ref.role) for ref in references(expr)]
    return found


def _check_identifier(where, name):
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ModelError(f"{where}: {name!r} is not a Python identifier; names become variables of the generated code")
    if unicodedata.normalize("NFKC", name) != name:
        raise ModelError(
            f"{where}: Python reads the name {name!r} as {unicodedata.normalize('NFKC', name)!r} (identifiers are "
            "NFKC-normalised), so it would be the same variable as that name; write it so"
        )
    if name.startswith("_"):
        raise ModelError(f"{where}: the name {name!r} starts with _, which the generated code keeps for its own names")


def _check_dimension(where, name, dim, sizes):
    """A dimension is a size, or a positive multiple of one (4*h: four stacked blocks of h rows), or 1 (a norm's
    mean and sigma)."""
    count, size = sp.sympify(dim).as_coeff_Mul()
    if not (size in sizes and count.is_Integer and count >= 1) and dim != 1:
        shown = ", ".join(map(str, sizes))
        raise ModelError(
            f"{where}: {name} has a dimension {dim}; "
            f"expected one of its sizes ({shown}) or a multiple of one such as 4*h"
        )


def _check_elementwise(where, seq, rhs):
    """SymPy's own functions (exp, tanh, Max) are scalar: on a vector they build nonsense."""
    for node in sp.preorder_traversal(rhs):
        scalar_of_matrix = isinstance(node, sp.Function) and any(isinstance(arg, sp.MatrixExpr) for arg in node.args)
        if scalar_of_matrix or isinstance(node, (sp.Adjoint, sp.MatPow)) and not node.args[-1].is_Integer:
            name = type(node).__name__ if scalar_of_matrix else "Abs or sqrt"
            raise ModelError(
                f"{where}: in the equation of {seq.name}_t, SymPy's {name}() is a scalar function; for an "
                f"elementwise function of a vector use bptt.derive.elementwise ({', '.join(sorted(FUNCTIONS))})"
            )
    if not isinstance(rhs, sp.MatrixExpr):
        raise ModelError(f"{where}: the equation of {seq.name}_t must be a column vector, got {_shown(rhs)}")


def _check_inner_shapes(where, seq, rhs):
    """Sizes must match by name: SymPy lets W (h x q) times x (d x 1) pass when d and q are symbols."""
    for node in sp.preorder_traversal(rhs):
        if isinstance(node, sp.MatMul):
            factors = node.as_coeff_matrices()[1]
            for left, right in zip(factors, factors[1:], strict=False):
                if left.shape[1] != right.shape[0]:
                    raise ModelError(
                        f"{where}: in the equation of {seq.name}_t, "
                        f"{notation(left)} ({left.shape[0]} x {left.shape[1]}) "
                        f"times {notation(right)} ({right.shape[0]} x {right.shape[1]}): the inner sizes differ"
                    )
        elif isinstance(node, (sp.MatAdd, sp.HadamardProduct)):
            shapes = {arg.shape for arg in node.args}
            if len(shapes) > 1:
                raise ModelError(
                    f"{where}: in the equation of {seq.name}_t, terms of different shapes {sorted(shapes, key=str)}"
                )


def _shown(value):
    """A value in a message: a SymPy expression in the user's notation, anything else as Python shows it."""
    return notation(value) if isinstance(value, sp.Basic) else repr(value)


def _check_reference(where, seq, ref, known_now, states):
    offset = sp.simplify(ref.time - t)
    if offset in (-1, 1) and ref.name in states:
        return
    if offset == 0 and ref.name in known_now:
        return
    if offset in (-1, 1):
        shift = f"t{int(offset):+d}"
        raise ModelError(f"{where}: {seq.name}_t reads {ref.name}_({shift}), but only states may be read at {shift}")
    raise ModelError(
        f"{where}: {seq.name}_t reads {ref.name} at time {ref.time}; "
        f"expected an input or an earlier assignment at t, or a state at t-1 (or t+1, a reverse-time state)"
    )
