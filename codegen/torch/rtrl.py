"""The torch module's forward-mode (RTRL) gradient: the Program's forward-mode statements printed as the
NumPy module's loop (printing/tangents.py) on tensors, carrying the tangents along the directions of every
gradient at once (P, B, n)."""

from bptt.codegen.printing.bindings import Printed, bound, output_adjoint
from bptt.codegen.printing.tangents import TangentPrinter
from bptt.codegen.torch.printer import SPELLING


class TorchTangentPrinter(TangentPrinter):
    """The forward-mode loops on tensors of the output gradient's dtype and device."""

    spelling = SPELLING

    def zeros(self, shape):
        return f"torch.zeros({shape}, dtype=dtype, device=device)"

    def ones(self, shape):
        return f"torch.ones({shape}, dtype=dtype, device=device)"

    def fresh(self, code):
        return f"{code}.clone()"

    def pad_columns(self, code, before, after):
        return f"torch.nn.functional.pad({code}, ({before}, {after}))"

    def einsum(self, spec, *operands):
        return f'torch.einsum("{spec}", {", ".join(operands)})'

    def entries(self, code):
        return f"{code}.numel()"


def rtrl_body(program):
    """The body of forward_mode_grads after the loss and dL/ds_t: bindings, then the loop and the gradients."""
    model = program.model
    output = output_adjoint(model)
    printer = TorchTangentPrinter(stacked=False)
    lines = printer.lines(program.forward_mode.statements)
    head = bound(printer.used, model, set(), program.cache)
    head += [f"T, B = {output}.shape[0], {output}.shape[1]", f"dtype, device = {output}.dtype, {output}.device"]
    return Printed.of(head + ["grads = {}"] + lines, printer.used)
