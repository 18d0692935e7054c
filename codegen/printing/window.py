"""Print the plain adjoint statements for window truncation: each output's gradient flows back at
most k steps. The adjoints that flow back through time get an age axis (how many steps a gradient
has flowed, 0..k): local terms enter at age 0, a flow from step t+1 arrives one age older, and
the window drops what would be older than k. Allocating, and slower than the full pass; only
`truncate=("window", k)` takes it."""

from dataclasses import replace

import sympy as sp

from bptt.codegen.ir import Statement, walk
from bptt.codegen.printing.printer import Code, RowPrinter, array_name
from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj, t


class Statements(RowPrinter):
    """Loops and guards: the base of the statement printers (this module's, statements.py's, torch's steps.py)."""

    def lines(self, statements):
        out = []
        for statement in statements:
            out += self._print(statement)
        return out

    def _print_Loop(self, loop):
        self.used.sizes.add("T")
        inner = self.at(False)
        head = "for t in range(T, 0, -1):" if loop.backward else "for t in range(1, T + 1):"
        return [head] + ["    " + line for line in inner.lines(loop.body)]

    def _print_Guard(self, guard):
        return ["if t < T:"] + ["    " + line for line in self.lines(guard.body)]

    def _print_Boundary(self, boundary):
        """A Guard, and at step T of a segment the same flows from the segment after it (passes/checkpoint.py)."""
        said = {s.comment for s in boundary.body if isinstance(s, Statement)}  # the equations, said in the guard
        following = [
            replace(s, comment="") if isinstance(s, Statement) and s.comment in said else s for s in boundary.following
        ]
        bind = [f'{name} = following["{name}"]' for name in boundary.crossings]
        body = ["    " + line for line in bind + self.lines(following)]
        return (
            self._print_Guard(boundary) + ["elif following:  # step T of a segment: the flow from the next one"] + body
        )


class WindowPrinter(Statements):
    """aged: the names of the sequences whose adjoints carry an age axis."""

    young = False  # printing the value of an adjoint without an age axis

    def __init__(self, aged):
        super().__init__(stacked=True)
        self.aged = frozenset(aged)

    def value(self, statement):
        """A statement's value. An adjoint without an age axis reads no recurrent adjoint (passes/loops.py), so an
        aged one it reads at t is aged only for the flow from t + 1 that reads it, and holds its values at age 0."""
        printer = self.at(self.stacked)
        printer.young = statement.target.of.name not in self.aged
        return printer(statement.value)

    def sequence(self, node):
        if self.young and isinstance(node, Adj) and node.of.name in self.aged and node.of.time == t:
            name = array_name(node)  # (T + 1, ages, B, rows)
            self.used.arrays.add(name)
            return Code(f"{name}[1:, 0]" if self.stacked else f"{name}[t, 0]")
        return super().sequence(node)

    def target(self, node):
        if self.stacked and node.of.name in self.aged:
            self.used.arrays.add(array_name(node))
            return f"{array_name(node)}[1:, 0]"
        return str(self(node))

    def _print_Assign(self, statement):
        if isinstance(statement.value, sp.ZeroMatrix):
            return []  # the aged arrays start at zero
        return [said(f"{self.target(statement.target)} = {self.value(statement)}", statement.comment)]

    def _print_Accumulate(self, statement):
        return [said(f"{self.target(statement.target)} += {self.value(statement)}", statement.comment)]

    def _print_Flow(self, statement):
        flow = f"{self.helper('_age')}({self(statement.value)})"
        return [said(f"{self.target(statement.target)} += {flow}", statement.comment)]

    def initial(self, initial, aged_reads):
        """dL/dS_0: the flow from step 1, one age older (if it is not data), summed over the ages."""
        code = str(self.at(False)(initial.value))
        if aged_reads:
            code = f"{self.helper('_age')}({code})" if initial.weighted else f"({code})"
            code += ".sum(axis=0)"
        return f"d_{initial.key} = {code}  # {initial.comment}"


def said(code, comment):
    """code, its equation as a trailing comment (none for a flow from the next segment: said in the guard)."""
    return f"{code}  # {comment}" if comment else code


def reads_aged(expr, recurrent):
    return {a.of.name for a in atoms(expr, Adj)} & set(recurrent)


def adjoint_seqs(statements):
    seen = {}
    for statement in walk(statements):
        target = getattr(statement, "target", None)
        if isinstance(target, Adj):
            seen.setdefault(target.of.name, target.of)
    return list(seen.values())
