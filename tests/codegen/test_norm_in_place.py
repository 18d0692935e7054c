"""A normalised cell's NumPy loops work in place (printing/statements.py): a norm's mean, deviation and x̂, its
adjoint (the runtime's _norm_adjoint, out=) and a slice's adjoint's blocks are each written by calls into arrays that
exist, never computed as a new array and copied in."""

import re

from bptt.tests.support.modules import module_of

ITEM_ASSIGNED = re.compile(r"\] \+?= ")  # `x[...] = expr`, `d_a_t[..., :n_h] = expr`, `x[...] += expr`


def loop_lines(source, function):
    """The lines of the `for t in range(...)` loop of the module's function."""
    body = source.split(f"\ndef {function}(", 1)[1].split("\ndef ", 1)[0]
    loop = body.split("    for t in range(", 1)[1]
    return [line for line in loop.splitlines()[1:] if line.startswith("        ")]


def test_the_layernorm_lstms_numpy_loops_assign_no_new_array():
    source = open(module_of("lstm-layernorm").__file__, encoding="utf-8").read()
    for function in ("_forward", "_adjoints"):
        lines = loop_lines(source, function)
        assert lines, function
        assert not [line for line in lines if ITEM_ASSIGNED.search(line)], function
    adjoints = loop_lines(source, "_adjoints")
    assert sum("_norm_adjoint(" in line and "out=" in line for line in adjoints) == 2  # c's and W_h h's norms
