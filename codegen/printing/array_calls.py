"""The calls of an array library that the in-place statement printer writes (printing/statements.py),
one table per library: NumPy's here, torch's in torch/calls.py. Each entry is a format string of code.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ArrayCalls:
    module: str  # the library's name in code: np, torch
    add: str  # {a} + {b} into {out}
    subtract: str
    multiply: str
    matmul: str
    step_matmul: str  # into a scratch array of one step (C-contiguous, as np.dot's out must be)
    minus_from: tuple  # lines for {out} = {c} - {x}, {c} a number
    negative: str
    square: str
    sqrt: str
    power: str  # {x} ** {p}
    copy: str  # {out} = {x}, broadcast
    zero: str
    concatenate: str  # {parts} stacked along their rows into {out}
    concatenate_columns: str
    empty: str  # an uninitialised array of {shape}, in the inputs' dtype (and device)
    ones: str
    takes_out: Callable  # name -> whether `module.name(x, ...)` takes out=
    sum_units: str | None = None  # {x}'s row sums into {out} (its last axis, kept); None: a norm's parts as one
    # expression each (printing/statements.py: of_units)
    mean_units: str | None = None  # {x}'s row means into {out}, as its product with {w}, a vector of 1/n; None:
    # its row sums scaled
    divide: str | None = None  # {a} / {b} into {out}; None: a product with b's reciprocal
    rows_out: bool = False  # whether a view of some rows of an array may be a call's out= (a slice's adjoint's block)

    def line(self, call, **values):
        return getattr(self, call).format(**values)


NUMPY = ArrayCalls(
    module="np",
    add="np.add({a}, {b}, out={out})",
    subtract="np.subtract({a}, {b}, out={out})",
    multiply="np.multiply({a}, {b}, out={out})",
    matmul="np.matmul({a}, {b}, out={out})",
    step_matmul="np.dot({a}, {b}, out={out})",  # np.matmul's product bit for bit, at half the cost of a call
    minus_from=("np.subtract({c}, {x}, out={out})",),
    negative="np.negative({x}, out={out})",
    square="np.square({x}, out={out})",
    sqrt="np.sqrt({x}, out={out})",
    power="np.power({x}, {p}, out={out})",
    copy="np.copyto({out}, {x})",
    zero="{out}.fill(0)",
    concatenate="np.concatenate(({parts}), out={out})",
    concatenate_columns="np.concatenate(({parts}), axis=1, out={out})",
    empty="np.empty({shape}, dtype)",
    ones="np.ones({shape}, dtype)",
    takes_out=lambda name: isinstance(getattr(np, name, None), np.ufunc),
    sum_units="np.add.reduce({x}, axis=-1, keepdims=True, out={out})",  # np.sum's work without its Python wrapper
    mean_units="np.dot({x}, {w}, out={out}[..., 0])",  # np.dot's out: C-contiguous, as a step's (B, 1) is
    divide="np.divide({a}, {b}, out={out})",
    rows_out=True,
)
