"""A model description checked before anything is derived: the first thing wrong with it, as a ModelError in the
user's notation (derive/model.py's Model checks itself so when it is made)."""

import keyword
import re
import unicodedata
from collections import Counter

import sympy as sp

from bptt.derive.direction import DirectionError, sweeps
from bptt.derive.elementwise import FUNCTIONS
from bptt.derive.model_error import ModelError
from bptt.derive.nodes import Loss, references, time_shift
from bptt.derive.text import notation


def validate(model, declared):
    """Raise ModelError naming the first thing wrong with a model description; declared: every sequence it reads
    or assigns, as declared (duplicates included)."""
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
    _check_names(where, model, declared)
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


def _check_names(where, model, declared):
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
    sequences = _check_sequences(where, model, declared)
    for param in model.params:
        if param.name in sequences:
            raise ModelError(f"{where}: {param.name!r} names a parameter and a sequence; give each its own name")
        for dim in param.shape if param.shape[1] != 1 else param.shape[:1]:  # a vector's columns: 1
            _check_dimension(where, param.name, dim, model.sizes)
    for name, seq in sequences.items():
        _check_dimension(where, name, seq.rows, model.sizes)


def _check_sequences(where, model, declared):
    """{name: Seq}: one sequence per name, each assigned at most once."""
    sequences = {}
    for seq in declared:
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
    offset = time_shift(ref.time)
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
