"""The statements between a model's derivation and a backend's printer.

program.py builds them from the derivation and optimize.py rewrites them;
a printer per backend (numpy_statements.py, with torch's calls for torch; jax_pass.py) turns them into code,
and the templates only lay the module out. Right-hand sides are SymPy
expressions of the derivation: SeqAt and Adj at a time, parameters, Apply...
Inside a Loop a statement is one step t; outside, it holds for every step at once.
"""

from dataclasses import dataclass

import sympy as sp

PARAMETER = (sp.MatrixSymbol, sp.MatrixSlice)  # a parameter, or a block of one (W_ih[h:2h, :])


def code_name(matrix):
    """A parameter's name in code; a block's, its parameter's and first row's: W_ih[2h:3h, :] -> W_ih_2h."""
    if isinstance(matrix, sp.MatrixSlice):
        start = "".join(char for char in str(matrix.rowslice[0]) if char.isalnum())
        return f"{matrix.parent.name}_{start}"
    return matrix.name


@dataclass(frozen=True)
class Statement:
    target: object
    value: object
    comment: str = ""


class Assign(Statement):
    """target = value. A target that appears in its own value stands for what it
    holds already (terms hoisted out of a loop were written there before it)."""


class Accumulate(Statement):
    """target += value."""


class Flow(Statement):
    """target += keep[t] value: the gradient flowing back from step t+1, weighted when truncating."""


@dataclass(frozen=True)
class Loop:
    """The body at every step: t = 1..T, or T..1 when backward."""

    body: tuple
    backward: bool = False


@dataclass(frozen=True)
class Guard:
    """Statements that read step t+1: they run for t < T only."""

    body: tuple


@dataclass(frozen=True)
class Stack:
    """name = parts stacked along their rows, once per call: gate weights that share an operand,
    or each gate's bias vectors summed."""

    name: str
    parts: tuple


@dataclass(frozen=True)
class Array:
    """An array a pass works in: `steps` is "T+1" (index = time), "T" (index = time - 1)
    or "" (one step: scratch reused at every t). A group has members, views of consecutive
    rows ((name, rows), ...), and spans, views of neighbouring members ((name, first, count), ...)."""

    name: str
    rows: object
    steps: str = "T+1"
    members: tuple = ()
    spans: tuple = ()

    def offsets(self):
        """{member name: (first row, rows)} of a stacked array."""
        out, start = {}, sp.S.Zero
        for name, rows in self.members:
            out[name] = (start, rows)
            start = start + rows
        return out


def adjoint_array(name):
    """The array of dL/dX for the sequence X named name: `d_h`, and `_d_x` for an internal `_x`."""
    return f"_d{name}" if name.startswith("_") else f"d_{name}"


def walk(statements):
    """Every statement, loops and guards opened, in order."""
    for statement in statements:
        yield statement
        if isinstance(statement, (Loop, Guard)):
            yield from walk(statement.body)


class Rows(sp.MatrixExpr):
    """Rows start .. start + count - 1 of a matrix: one parameter's share of a stacked gradient."""

    def __new__(cls, matrix, start, count):
        return sp.MatrixExpr.__new__(cls, matrix, sp.sympify(start), sp.sympify(count))

    matrix, start, count = (property(lambda self, i=i: self.args[i]) for i in range(3))
    shape = property(lambda self: (self.args[2], self.args[0].shape[1]))
