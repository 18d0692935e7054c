"""The torch module's forward-mode (RTRL) gradient: forward_mode.blocks printed in torch, one loop per
parameter and initial state carrying the tangents along all of its entries at once (P, B, n)."""

from dataclasses import dataclass

from .forward_mode import Arrays, TangentPrinter, block_lines, blocks
from .numpy_bindings import bound, output_adjoint
from .numpy_printer import Code
from .torch_printer import TorchPrinter

TORCH_ARRAYS = Arrays(
    "torch.zeros({shape}, dtype=dtype, device=device)", "torch.zeros_like", "torch.einsum", ".numel()"
)


class TorchTangentPrinter(TangentPrinter, TorchPrinter):
    def directions(self, rows):
        ones = "torch.ones((B, 1), dtype=dtype, device=device)"
        return Code(f"{self.helper('_directions')}({ones}, {self(rows)})")


@dataclass(frozen=True)
class Body:
    lines: tuple
    helpers: frozenset


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
    return Body(tuple(head + ["grads = {}"] + lines), frozenset(printer.used["helpers"]))
