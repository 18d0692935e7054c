"""The IR: the statements between a model's derivation and a backend's printer, and every node they are made of.

codegen/program.py builds a Program from the derivation (codegen/passes/forward_mode.py the forward-mode
loops); the passes in codegen/passes/, each Program -> Program, rewrite it (program.py lists them in order;
rewrite below is their loop-body recursion). Each backend prints them: codegen/printing/statements.py in place (NumPy,
and torch with torch's calls), printing/window.py the window-truncated adjoints (torch/backward.py with
torch's), jax/scan.py and jax/statements.py as JAX scans, and printing/tangents.py, torch/rtrl.py and
jax/forward_mode.py the forward mode. The templates only lay the module out. Boundary, Crossing and
Checkpoints (bounded memory) live in ir_checkpoints.py; the forward mode's nodes (Units, TangentLoop and its
parts, Gradient, ZeroGradient) in ir_tangents.py.

Node tree (what each holds)::

    Program                   model, cache, recurrent, returns (key, value, comment), and:
    ├── Pass                  statements, arrays, stacks: forward, adjoints, window, gradients, forward_mode
    │   ├── Statement         target, value, comment
    │   │   ├── Assign        target = value
    │   │   ├── Accumulate    target += value
    │   │   └── Flow          target += keep[t] value
    │   ├── Loop              body (statements at step t), backward
    │   │   └── Guard         body (statements that run for t < T only)
    │   │       └── Boundary  following, crossings: at step T of a segment, the flow from the next one
    │   ├── Units             rows: every direction of a vector, for forward mode
    │   ├── TangentLoop       directions (Direction: key, wrt), carried, arrays (TangentArray), body, comment:
    │   │   ├── Previous          state: dot_S_prev at the top of step t
    │   │   ├── Assign            Tangent(X_t) = value, for every direction at once
    │   │   ├── AddAlong          target, along (a Direction), value: a local term, into its rows only
    │   │   └── Contract          tangent, adjoint, along: a share of step t of every gradient
    │   ├── Gradient          direction: grads[key] from the loop's total
    │   ├── ZeroGradient      key, wrt, comment
    │   ├── Array             name, rows, steps (Steps, or PerCall), members, spans
    │   └── Stack             name, parts
    ├── Initial               key, value, weighted, comment: dL/dS_0 (Program.initial, .window_initial)
    └── Checkpoints           kept, reads, rows of a state and of a step, crossings (Crossing: name, node, read, first)

Values are SymPy expressions of the derivation (SeqAt and Adj at a time, parameters, Apply...) and
three matrix expressions of the IR's own: Rows(matrix, start, count), Copy(value), ZerosLike(like).
Inside a Loop a statement is one step t; outside, it holds for every step at once.
"""

from dataclasses import dataclass, replace
from enum import Enum

import sympy as sp

PARAMETER = (sp.MatrixSymbol, sp.MatrixSlice)  # a parameter, or a block of one (W_ih[h:2h, :])


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


class Steps(Enum):
    """The steps an Array holds, and so its leading axes (before its rows)."""

    FROM_ZERO = "0..T"  # (T + 1, B, rows), index = time: states and intermediates, step 0 the initial state
    FROM_ONE = "1..T"  # (T, B, rows), index = time - 1: inputs, outputs, targets, scratch of all steps
    ONE = "t"  # (B, rows): one step, scratch reused at every t
    ONES = "ones"  # (T * B,): ones, that sum over all steps and samples as a product


@dataclass(frozen=True)
class PerCall:
    """An Array of no steps, made once per call: a stacked or transposed weight, (rows, cols); (rows,) if cols is 1."""

    cols: object


@dataclass(frozen=True)
class Array:
    """An array a pass works in, holding `steps` (Steps, or PerCall for a weight). A group has members,
    views of consecutive rows ((name, rows), ...), and spans, views of neighbouring members
    ((name, first, count), ...)."""

    name: str
    rows: object
    steps: Steps | PerCall = Steps.FROM_ZERO
    members: tuple = ()
    spans: tuple = ()

    def offsets(self):
        """{member name: (first row, rows)} of a stacked array."""
        out, start = {}, sp.S.Zero
        for name, rows in self.members:
            out[name] = (start, rows)
            start = start + rows
        return out


@dataclass(frozen=True)
class Pass:
    """The statements of one generated function, the arrays they work in, and the
    parameters they stack once per call (ir.Stack)."""

    statements: tuple
    arrays: tuple = ()
    stacks: tuple = ()


@dataclass(frozen=True)
class Initial:
    """dL/dS_0 = value (read at step 1); `weighted`: it flows back through time, so truncation weights it."""

    key: str
    value: object
    weighted: bool
    comment: str


@dataclass(frozen=True)
class Program:
    """Everything a backend prints for one model (program.build makes it)."""

    model: object
    cache: tuple  # what forward keeps for backward: the input, then sequence names
    forward: Pass  # states, cached intermediates and outputs, into work arrays
    adjoints: Pass  # full BPTT; flows weighted by keep[t] when truncating
    window: Pass  # the same, with an age axis (window truncation); plain statements
    initial: tuple  # Initial per state, for the fast pass
    window_initial: tuple  # Initial per state, plain
    gradients: Pass  # stacked parameter-gradient products, before the return
    returns: tuple  # (key, value, comment): the gradients backward returns
    owned_returns: tuple  # the same, every rows view copied: for tensors whose views keep a whole storage (torch)
    recurrent: tuple  # adjoints that flow back through time (an age axis in the window pass)
    forward_mode: Pass  # the gradients by forward mode (RTRL): Units, then a TangentLoop per gradient
    checkpoints: object  # ir_checkpoints.Checkpoints: what a bounded-memory backward pass keeps, stores, hands back


# Matrix expressions of the IR's own, inside statements' values.


class Rows(sp.MatrixExpr):
    """Rows start .. start + count - 1 of a matrix: one parameter's share of a stacked gradient."""

    def __new__(cls, matrix, start, count):
        return sp.MatrixExpr.__new__(cls, matrix, sp.sympify(start), sp.sympify(count))

    matrix, start, count = (property(lambda self, i=i: self.args[i]) for i in range(3))
    shape = property(lambda self: (self.args[2], self.args[0].shape[1]))


class Copy(sp.MatrixExpr):
    """A fresh copy of value: a returned gradient that would otherwise be a view of an array that
    another returned gradient, the workspace, the cache or the caller holds (passes/fresh.py)."""

    def __new__(cls, value):
        return sp.MatrixExpr.__new__(cls, value)

    value = property(lambda self: self.args[0])
    shape = property(lambda self: self.args[0].shape)


class ZerosLike(sp.MatrixExpr):
    """Zeros with the array of `like` as template (its shape, dtype, device): a returned gradient that is
    zero, because nothing the loss reads depends on what it is the gradient of."""

    def __new__(cls, like):
        return sp.MatrixExpr.__new__(cls, like)

    like = property(lambda self: self.args[0])
    shape = property(lambda self: self.args[0].shape)


def walk(statements):
    """Every statement, loops and guards opened, in order."""
    for statement in statements:
        yield statement
        if isinstance(statement, (Loop, Guard)):
            yield from walk(statement.body)


def rewrite(statements, leaf=None, guard=None):
    """statements with each one that is not a Loop or Guard replaced by leaf(statement) (kept if leaf is None),
    and every Loop and Guard rebuilt around its body rewritten so (a Boundary keeps its other fields), each
    Guard then replaced by guard(rebuilt) if guard is given: a pass's loop-body recursion, in one place."""

    def one(statement):
        if isinstance(statement, Loop):
            return replace(statement, body=rewrite(statement.body, leaf, guard))
        if isinstance(statement, Guard):
            rebuilt = replace(statement, body=rewrite(statement.body, leaf, guard))
            return guard(rebuilt) if guard else rebuilt
        return leaf(statement) if leaf else statement

    return tuple(one(statement) for statement in statements)


def the_loop(statements):
    """The Loop among a Pass's top-level statements (a Pass has at most one), or None."""
    return next((statement for statement in statements if isinstance(statement, Loop)), None)


def with_body(a_pass, body):
    """The Pass with its Loop's body replaced by the statements `body` (the loop's direction kept)."""
    loop = the_loop(a_pass.statements)
    return replace(a_pass, statements=spliced(a_pass.statements, loop, [replace(loop, body=tuple(body))]))


def spliced(statements, old, new):
    """statements with `old` (one of them, by identity) replaced by the statements `new`: a loop rebuilt, with
    what a pass computes before or after it."""
    return tuple(item for statement in statements for item in (tuple(new) if statement is old else (statement,)))


def groups_of(a_pass):
    """The groups among a Pass's arrays (arrays with members)."""
    return [array for array in a_pass.arrays if array.members]


def members_of(a_pass):
    """The names of the members of a Pass's groups."""
    return {name for group in groups_of(a_pass) for name, _ in group.members}


def with_groups(a_pass, groups):
    """The Pass with each of its arrays that is one of the groups (by name) replaced by it."""
    by_name = {group.name: group for group in groups}
    return replace(a_pass, arrays=tuple(by_name.get(array.name, array) for array in a_pass.arrays))


def step_rows(arrays):
    """The rows of one step of the arrays that hold every step (a group once: its members are views)."""
    return sum((array.rows for array in arrays if array.steps in (Steps.FROM_ZERO, Steps.FROM_ONE)), sp.S.Zero)
