"""Typed seams in codegen: every node a Program holds is a class of ir.py, drawn in its docstring's tree;
an array's steps are an ir.Steps or ir.PerCall that the printers read; a printer records what it
prints in a Used of named sets."""

import dataclasses
import enum
import inspect
import re

import pytest
import sympy as sp

from bptt.codegen import ir, ir_checkpoints, ir_tangents
from bptt.codegen.ir import Array, PerCall, Steps
from bptt.codegen.numpy.bodies import backward_bodies
from bptt.codegen.printing.layout import forward_body
from bptt.codegen.printing.printer import PrintError, RowPrinter
from bptt.codegen.printing.used import Used
from bptt.codegen.printing.work import dims
from bptt.codegen.program import build
from bptt.derive.models import load
from bptt.derive.nodes import SeqAt, Softmax, t
from bptt.tests.support.zoo import supporting

H, D = sp.Symbol("h"), sp.Symbol("d")


def nodes(item):
    """Every IR object reachable from item (a Program, a Pass, a statement...), item first."""
    yield item
    if isinstance(item, (tuple, list)):
        for part in item:
            yield from nodes(part)
    elif dataclasses.is_dataclass(item) and not isinstance(item, type):
        for field in dataclasses.fields(item):
            if field.name != "model":
                yield from nodes(getattr(item, field.name))


def codegen_classes(program):
    """The classes of codegen/ among a program's nodes and inside its SymPy values."""
    found = set()
    for node in nodes(program):
        parts = sp.preorder_traversal(node) if isinstance(node, sp.Basic) else [node]
        found |= {type(part) for part in parts if type(part).__module__.startswith("bptt.codegen")}
    return found


def drawn(name):
    """Whether ir.py's docstring names a class in its node tree."""
    return re.search(rf"\b{name}\b", ir.__doc__.split("Node tree", 1)[1]) is not None


def ir_classes():
    """The node classes ir.py defines: dataclasses, enums and SymPy matrix expressions."""
    return {
        name
        for module in (ir, ir_checkpoints, ir_tangents)
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and value.__module__ == module.__name__
        and (dataclasses.is_dataclass(value) or issubclass(value, (enum.Enum, sp.MatrixExpr)))
    }


@pytest.mark.parametrize("name", ["elman", "lstm", "jordan"])
def test_every_node_of_a_program_is_an_ir_class(name):
    """What program.build returns is made of the IR's classes only (ir.py's, ir_checkpoints.py's and
    ir_tangents.py's; no node defined in a pass or a printer)."""
    classes = codegen_classes(build(load(name)))
    assert {ir.Program, ir.Pass, ir.Assign, ir.Array, ir.Steps, ir.Initial, ir_tangents.TangentLoop} <= classes
    assert ir_checkpoints.Checkpoints in classes and (ir_checkpoints.Boundary in classes) == (name != "jordan")
    modules = (ir.__name__, ir_checkpoints.__name__, ir_tangents.__name__)
    assert {c.__qualname__ for c in classes if c.__module__ not in modules} == set()


def test_the_docstring_of_ir_draws_every_node_class():
    classes = ir_classes()
    assert {"Program", "Pass", "Initial", "Assign", "Steps", "PerCall", "Rows", "Copy", "ZerosLike"} <= classes
    assert {"Boundary", "Crossing", "Checkpoints", "TangentLoop", "Units"} <= classes
    assert sorted(name for name in classes if not drawn(name)) == []


@pytest.mark.parametrize("name", supporting("one_program"))
def test_every_array_printed_holds_typed_steps(name):
    """The passes' arrays, and those the NumPy printer adds (stacked weights, scratch, ones), have steps
    of ir.Steps or ir.PerCall."""
    program = build(load(name))
    arrays = [node for node in nodes(program) if isinstance(node, Array)]
    arrays += forward_body(program)[0] + list(backward_bodies(program).arrays)
    kinds = {type(array.steps) for array in arrays}
    assert kinds <= {Steps, PerCall}, kinds
    assert Steps.FROM_ZERO in {array.steps for array in arrays}


def test_steps_say_how_a_printer_reads_an_array():
    """Steps 0..T index by time, steps 1..T by time - 1; one step has no time axis and no stacked form."""
    arrays = {name: Array(name, H, steps) for name, steps in (("h", Steps.FROM_ZERO), ("x", Steps.FROM_ONE))}
    arrays["s"] = Array("s", H, Steps.ONE)
    h, x, s = (SeqAt(name, time, H, "state") for name, time in (("h", t - 1), ("x", t), ("s", t)))
    step, stacked = RowPrinter(stacked=False, arrays=arrays), RowPrinter(stacked=True, arrays=arrays)
    assert [step(h), step(x), step(s)] == ["h[t - 1]", "x[t - 1]", "s"]
    assert [stacked(h), stacked(x)] == ["h[:-1]", "x"]
    with pytest.raises(PrintError, match="holds one step"):
        stacked(s)


def test_steps_give_an_array_its_dims():
    kinds = [Steps.FROM_ZERO, Steps.FROM_ONE, Steps.ONE, Steps.ONES, PerCall(D), PerCall(1)]
    assert [dims(Array(f"a{k}", H, steps)) for k, steps in enumerate(kinds)] == [
        ("T+1", "B", "h"),
        ("T", "B", "h"),
        ("B", "h"),
        ("T*B",),
        ("h", "d"),
        ("h",),
    ]


def test_a_printer_records_what_it_prints_by_kind():
    W = sp.MatrixSymbol("W", 2 * H, H)  # its second block of rows: a size printed
    printer = RowPrinter(stacked=False)
    printer(Softmax(W[H : 2 * H, :] * SeqAt("h", t - 1, H, "state")))
    assert printer.used == Used(params={"W"}, sizes={"h"}, arrays={"h"}, helpers={"_softmax"})
    both = printer.used | Used(sizes={"T"}, helpers={"_onehot"})
    assert both == Used(params={"W"}, sizes={"h", "T"}, arrays={"h"}, helpers={"_softmax", "_onehot"})
    assert printer.used.sizes == {"h"}  # the union is a new record
