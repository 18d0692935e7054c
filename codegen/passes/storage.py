"""The adjoints' arrays: one per adjoint the backward pass assigns, but the gates' (views of their group)
and those that can be computed in place in another adjoint's array."""

from dataclasses import replace

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Array, Assign, groups_of, members_of, the_loop, walk
from bptt.codegen.passes.inline import adjoint_reads, read_after
from bptt.derive.nodes import Adj, Diag, t


def adjoint_arrays(program):
    """The Program whose adjoints Pass holds an array per adjoint it assigns, after the groups and before the
    hoisted factors: none for a member of a group, and a view of dL/dY's array for a dL/dX that takes it
    (_shared_storage)."""
    adjoints = program.adjoints
    groups, grouped = groups_of(adjoints), members_of(adjoints)
    factors = [array for array in adjoints.arrays if not array.members]
    targets = [s.target.of for s in walk(adjoints.statements) if isinstance(getattr(s, "target", None), Adj)]
    shared = _shared_storage(adjoints.statements, read_after(program), grouped)
    arrays = {
        adjoint_array(seq.name): Array(adjoint_array(seq.name), seq.rows)
        for seq in dict.fromkeys(targets)
        if adjoint_array(seq.name) not in grouped and seq.name not in shared
    }
    for name, onto in shared.items():
        array = arrays[adjoint_array(onto.name)]
        arrays[array.name] = replace(array, members=array.members + ((adjoint_array(name), array.rows),))
    return replace(program, adjoints=replace(adjoints, arrays=tuple(groups + list(arrays.values()) + factors)))


def _shared_storage(statements, others, grouped):
    """{X: Y} for each adjoint dL/dX_t = diag(...) dL/dY_t computed where nothing reads dL/dY_t after it:
    dL/dX takes dL/dY's array (its array is a view of dL/dY's), computed in place."""
    loop = the_loop(statements)
    values = [s.value for s in walk(statements) if hasattr(s, "value")] + list(others)
    shared = {}
    for statement in loop.body if loop else ():
        if not (isinstance(statement, Assign) and isinstance(statement.target, Adj)):
            continue
        coeff, factors = statement.value.as_coeff_matrices() if isinstance(statement.value, sp.MatMul) else (1, [])
        read = factors[-1] if factors else None
        elementwise = factors and all(isinstance(f, Diag) for f in factors[:-1]) and isinstance(read, Adj)
        if not elementwise or read.of.time != t or read.of.rows != statement.target.of.rows:
            continue
        name, onto = statement.target.of.name, read.of
        if {adjoint_array(name), adjoint_array(onto.name)} & grouped or onto.name in shared:
            continue
        if sum(adjoint_reads(value, onto.name) for value in values) == 1:
            shared[name] = onto
    return shared
