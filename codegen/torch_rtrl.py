"""The torch module's forward-mode (RTRL) gradient: forward_mode.blocks printed in torch, one loop per
parameter and initial state carrying the tangents along all of its entries at once (P, B, n)."""

import sympy as sp

from .forward_mode import Arrays, TangentPrinter, block_lines, blocks
from .numpy_bindings import Printed, bound, output_adjoint
from .numpy_printer import Code
from .torch_printer import TorchPrinter

TORCH_ARRAYS = Arrays(
    "torch.zeros({shape}, dtype=dtype, device=device)", "torch.zeros_like", "torch.einsum", ".numel()"
)


class TorchTangentPrinter(TangentPrinter, TorchPrinter):
    """The tangent of a vector parameter along all its entries (every direction of it) is a constant:
    printed as a name, bound once before the loops (`units_lines`)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.units = {}  # rows -> the name of every direction of a vector of that many entries

    def directions(self, rows):
        if rows not in self.units:
            self.units[rows] = f"units_{self(rows)}" if isinstance(rows, sp.Symbol) else f"units_{len(self.units)}"
        return Code(self.units[rows])

    def units_lines(self):
        ones = "torch.ones((B, 1), dtype=dtype, device=device)"
        return [
            f"{name} = {self.helper('_directions')}({ones}, {self(rows)})  # every direction of a vector of {rows} entries"
            for rows, name in self.units.items()
        ]


def rtrl_body(program):
    """The body of forward_mode_grads after the loss and dL/ds_t: bindings, then a loop per block."""
    model = program.model
    output = output_adjoint(model)
    printer = TorchTangentPrinter(stacked=False)
    lines = []
    for block in blocks(model):
        lines += block_lines(printer, block, output, TORCH_ARRAYS)
    head = bound(printer.used, model, set(), set(program.cache))
    head += [f"T, B = {output}.shape[0], {output}.shape[1]", f"dtype, device = {output}.dtype, {output}.device"]
    head += printer.units_lines()
    return Printed.of(head + ["grads = {}"] + lines, printer.used)
