"""The names the IR's arrays take in every backend's code, made from the names of the maths."""

import sympy as sp


def code_name(matrix):
    """A parameter's name in code; a block's, its parameter's and first row's, and its first column's where that is
    not the first: W_ih[2h:3h, :] -> W_ih_2h, W_ih[2h:3h, h:2h] -> W_ih_2h_h."""
    if isinstance(matrix, sp.MatrixSlice):
        starts = [matrix.rowslice[0]] + ([matrix.colslice[0]] if matrix.colslice[0] != 0 else [])
        return "_".join([matrix.parent.name] + ["".join(char for char in str(s) if char.isalnum()) for s in starts])
    return matrix.name


def adjoint_array(name):
    """The array of dL/dX for the sequence X named name: `d_h`, and `_d_x` for an internal `_x`."""
    return f"_d{name}" if name.startswith("_") else f"d_{name}"


def units_name(rows):
    """The array of every direction of a vector of `rows` entries: `units_n_h`, `units_4h` for 4*h."""
    if isinstance(rows, sp.Symbol):
        return f"units_n_{rows.name}"
    return "units_" + "".join(char for char in str(rows) if char.isalnum())


def tangent_array(seq):
    """The array of a state's tangents, or of a named intermediate's at t: `dot_h`."""
    return f"dot_{seq.name}"


def previous_tangent_array(seq):
    """The array of a state's tangents at t - 1, once the step has assigned those at t: `dot_h_prev`."""
    return f"dot_{seq.name}_prev"


def along_name(key):
    """The rows of a gradient's directions in the stack: `along_W`, `along_h0`."""
    return f"along_{key}"
