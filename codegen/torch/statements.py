"""The torch module's in-place statement printer: the NumPy module's (printing/statements.py) with torch's
spelling and calls, its loops' sums one in-place call a term (sums.py), and each loop's step a function too, run
through torch.compile for compile=True (steps.py)."""

from bptt.codegen.printing.code import PrintError
from bptt.codegen.torch.calls import TORCH
from bptt.codegen.torch.printer import SPELLING
from bptt.codegen.torch.steps import StepPrinter
from bptt.codegen.torch.sums import InPlaceSums
from bptt.codegen.torch.units import UnitsInPlace


class TorchStatements(UnitsInPlace, InPlaceSums):
    """Statements in place into preallocated tensors (out=, addmm_, addcmul_): 2-D GEMMs over (T*B, k) views,
    stacked gate weights, as the NumPy module computes them. groups: {member or span: (its stacked tensor,
    (first row, end))}; step_functions: the loops' steps as functions (steps.py)."""

    spelling, calls = SPELLING, TORCH

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

    def _print_Loop(self, loop):
        """Each step of a loop runs its step function through torch.compile when compile=True (for t < T in the
        backward loop), else as printed in place."""
        head, body = self.loop_parts(loop)
        name = "_adjoints_step" if loop.backward else "_forward_step"
        if any(function.name == name for function in self.step_functions):
            raise PrintError(f"a second {'backward' if loop.backward else 'forward'} loop: {name} is taken")
        steps = StepPrinter(self)
        function = steps.function(name, loop.body)
        for names, more in zip(vars(self.used).values(), vars(steps.used).values(), strict=True):
            names |= more  # what the step reads, bound where the loop is
        self.step_functions.append(function)
        choose = (
            f"_step = {self.helper('_compiled')}({name}) if compile else None  # compile=True: through torch.compile"
        )
        return [choose, head] + ["    " + line for line in function.call() + body]
