"""Where the values of a JAX module's forward pass live: each ir.Array of the pass, and its groups' members and
spans as views of their group's rows (jax/scan.py prints the pass; the backward and forward-mode printers read
the cache through the same table)."""

from dataclasses import dataclass

import sympy as sp

from bptt.codegen.ir import Array


@dataclass(frozen=True)
class Place:
    """Where a sequence lives: rows first .. first + rows - 1 of the array `home` (all of it if whole)."""

    home: str
    first: object
    rows: object
    whole: bool


def places(arrays):
    """{name: Place} for every array of a pass, and each group's members and spans."""
    out = {}
    for array in arrays:
        out[array.name] = Place(array.name, sp.S.Zero, array.rows, True)
        offsets = array.offsets()
        for name, _ in array.members:
            out[name] = Place(array.name, *offsets[name], False)
        for name, first, count in array.spans:
            names = [member for member, _ in array.members[first : first + count]]
            start = offsets[names[0]][0]
            out[name] = Place(array.name, start, sum(offsets[n][1] for n in names), False)
    return out


def value_arrays(arrays):
    """{name: ir.Array} of a pass's arrays and their groups' members and spans (a member holds its group's steps)."""
    table = {}
    for array in arrays:
        table[array.name] = array
        table.update({name: Array(name, rows, array.steps) for name, rows in array.members})
        table.update({name: Array(name, None, array.steps) for name, _, _ in array.spans})
    return table
