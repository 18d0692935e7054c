"""The torch module's forward-mode (RTRL) gradient: forward_mode.blocks printed in torch, one loop per
parameter and initial state carrying the tangents along all of its entries at once (P, B, n)."""

from dataclasses import dataclass

from bptt.derive.tangent import Tangent

from .forward_mode import TangentPrinter, blocks
from .numpy_bindings import bound, output_adjoint
from .numpy_printer import Code
from .text import text
from .torch_printer import TorchPrinter


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
        lines += block_lines(printer, block, output)
    head = bound(printer.used, model, set(), set(program.cache))
    head += [f"T, B = {output}.shape[0], {output}.shape[1]", f"dtype, device = {output}.dtype, {output}.device"]
    return Body(tuple(head + ["grads = {}"] + lines), frozenset(printer.used["helpers"]))


def block_lines(printer, block, output):
    size = printer(block.wrt.rows) if block.per_sample else f"{printer(block.wrt)}.numel()"
    where = "dtype=dtype, device=device"
    out = [f"# {block.key}: tangents along every entry of {block.key}" + (", for each sample" if block.per_sample else "")]
    out += [f"dot_{s.name} = torch.zeros(({size}, B, {printer(s.rows)}), {where})" for s in block.zero]
    step = []
    if block.per_sample and block.forced:
        out += [f"first = {printer.directions(block.wrt.rows)}", "zero = torch.zeros_like(first)"]
        step.append(f"dot_{block.wrt.name} = first if t == 1 else zero  # {text(Tangent(block.wrt(0)))} enters step 1 only")
    elif block.per_sample:
        out.append(f"dot_{block.wrt.name} = {printer.directions(block.wrt.rows)}")
    if block.updates:
        names = ", ".join(f"dot_{s.name}" for s, _ in block.updates)
        codes = ", ".join(str(printer(value)) for _, value in block.updates)
        comment = "; ".join(f"{text(Tangent(s()))} = {text(value)}" for s, value in block.updates)
        step.append(f"{names} = {codes}  # {comment}")
    out.append(f"total = torch.zeros({f'(B, {size})' if block.per_sample else size}, {where})")
    out.append("for t in range(1, T + 1):")
    out += [f"    {line}" for line in step]
    contract = "bp" if block.per_sample else "p"
    out.append(f'    total += torch.einsum("pbk,bk->{contract}", {printer(block.outputs)}, {output}[t - 1])')
    out.append(f'grads["{block.key}"] = total' + ("" if block.per_sample else f".reshape({block.key}.shape)"))
    return out
