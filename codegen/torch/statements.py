"""The torch module's in-place statement printer: the NumPy module's (printing/statements.py) with torch's
calls, its loops' sums one in-place call a term (sums.py), and each loop's step a function too, run through
torch.compile for compile=True (steps.py)."""

from bptt.codegen.printing.array_calls import TORCH
from bptt.codegen.printing.statements import NumPyPrinter
from bptt.codegen.torch.printer import TorchPrinter
from bptt.codegen.torch.steps import StepLoops
from bptt.codegen.torch.sums import InPlaceSums


class TorchStatements(StepLoops, InPlaceSums, NumPyPrinter, TorchPrinter):
    """Statements in place into preallocated tensors (out=, addmm_, addcmul_): 2-D GEMMs over (T*B, k) views,
    stacked gate weights, as the NumPy module computes them. groups: {member or span: (its stacked tensor,
    (first row, end))}; step_functions: the loops' steps as functions (steps.py)."""

    calls = TORCH

    def __init__(self, arrays=(), *args, **keywords):
        super().__init__(arrays, *args, **keywords)
        self.step_functions = []
        self.groups = {}
        for array in arrays:
            starts = {name: (start, start + rows) for name, (start, rows) in array.offsets().items()}
            self.groups.update({name: (array.name, rows) for name, rows in starts.items()})
            for name, first, count in array.spans:
                members = [member for member, _ in array.members[first : first + count]]
                self.groups[name] = (array.name, (starts[members[0]][0], starts[members[-1]][1]))
