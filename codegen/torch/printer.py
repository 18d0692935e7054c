"""Print derived matrix expressions and statements as PyTorch code (the torch backend's printers).

The algebra is NumPy's row form (numpy_printer.RowPrinter): `W v` prints `v @ W.T`, and `.T` only
ever meets a 2-D parameter or a 2-D `(T*B, k)` view, so it means the same in torch. What differs is
printed here: elementwise functions from torch's table (torch/functions.py), sums over all steps and samples,
the one-hot lookups and scatters, the losses. The forward pass is the NumPy backend's in-place
printer with torch's table of calls (TorchStatements); the backward statements are plain
expressions written into the adjoint tensors (AdjointPrinter). Both run under torch.no_grad().
"""

import sympy as sp

from bptt.codegen.ir import PARAMETER
from bptt.codegen.printing.array_calls import TORCH
from bptt.codegen.printing.printer import ATOM, SUM, Code, RowPrinter
from bptt.codegen.printing.statements import NumPyPrinter
from bptt.codegen.printing.window import WindowPrinter
from bptt.codegen.torch.functions import TORCH_FUNCTIONS
from bptt.codegen.torch.sums import InPlaceSums
from bptt.derive.nodes import Diag, equal


class TorchPrinter(RowPrinter):
    """Row form in torch: one step (`stacked=False`) or all steps t = 1..T at once."""

    backend, form, functions = "torch", "torch", TORCH_FUNCTIONS

    def index_of(self, block):
        """A block's index in its parameter as a tuple of slices: `(slice(n_h, 2 * n_h),)`; all for None."""
        if block is None:
            return "(slice(None),)"
        rows, columns = block.parent.shape
        ends = [block.rowslice[:2] + (rows,)]
        if columns != 1 and not (block.colslice[0] == 0 and equal(block.colslice[1], columns)):
            ends.append(block.colslice[:2] + (columns,))
        parts = []
        for start, stop, size in ends:
            first = "None" if start == 0 else self._print(start)
            last = "None" if equal(stop, size) else self._print(stop)
            parts.append(f"slice({first}, {last})")
        return "(" + ", ".join(parts) + ",)"

    def _print_Copy(self, expr):
        return Code(f"{self.operand(expr.value, ATOM)}.clone()")

    def _print_ZerosLike(self, expr):
        return Code(f"torch.zeros_like({self._print(expr.like)})")

    def _print_Softmax(self, expr):
        return Code(f"torch.softmax({self._print(expr.arg)}, dim=-1)")

    def gradient_term(self, term):
        """One term of sum_t (...): a vector summed over the T*B rows, or an outer product as one
        (T*B)-long product of 2-D views."""
        rows = self._print(term.shape[0])
        if term.shape[1] == 1:
            return f"{self.operand(term, ATOM)}.reshape(-1, {rows}).sum(0)"
        return super().gradient_term(term)

    def _print_SoftmaxCrossEntropy(self, loss):
        logits, labels = self._print(loss.prediction), self._print(loss.target)
        picked = f"torch.gather({logits}, -1, {labels}[..., None])[..., 0]"
        return Code(f"torch.logsumexp({logits}, -1) - {picked}", SUM)


class TorchStatements(InPlaceSums, NumPyPrinter, TorchPrinter):
    """The in-place statement printer with torch's calls: out= into preallocated tensors, 2-D GEMMs
    over (T*B, k) views, stacked gate weights, as the NumPy module computes them; a loop's sums one
    in-place call a term (torch/sums.py)."""

    calls = TORCH


class AdjointPrinter(WindowPrinter, TorchPrinter):
    """The plain backward statements (ir.Assign, Accumulate, Flow, Loop, Guard) as torch lines that write
    into zero-initialised adjoint tensors. window=False: full BPTT, each flow from step t+1 weighted by
    keep[t] when truncating; window=True: the recurrent adjoints carry an age axis (printing/window.py)."""

    def __init__(self, aged, window):
        super().__init__(aged if window else ())
        self.window = window

    def target(self, node):
        return super().target(node) if self.window else str(self(node))

    def _print_Flow(self, statement):
        if self.window:
            return super()._print_Flow(statement)
        flow = f"{self.helper('_weighted')}(keep, t, {self(statement.value)})"
        return [f"{self.target(statement.target)}.add_({flow})  # {statement.comment}"]

    def _print_Accumulate(self, statement):
        if self.window or self.stacked:
            return super()._print_Accumulate(statement)
        return [f"{self.target(statement.target)}.add_({self(statement.value)})  # {statement.comment}"]

    def _print_Assign(self, statement):
        """In the loop, a product of two factors is written straight into its step of the adjoint (out=),
        unless it reads that step itself (what it holds already)."""
        reads_itself = statement.target in statement.value.atoms(type(statement.target))
        call = None if self.window or self.stacked or reads_itself else self.into(statement.value)
        if call is None:
            return super()._print_Assign(statement)
        function, args = call
        arguments = ", ".join([*map(self, args), f"out={self.target(statement.target)}"])
        return [f"{function}({arguments})  # {statement.comment}"]

    def into(self, value):
        """(torch.mul, (a, b)) for diag(a) b or a * b, (torch.matmul, (b, P)) for P^T b, else None."""
        if isinstance(value, sp.HadamardProduct) and len(value.args) == 2:
            return "torch.mul", value.args
        if isinstance(value, sp.MatMul):
            coeff, factors = value.as_coeff_matrices()
            if coeff == 1 and len(factors) == 2 and factors[1].shape[1] == 1:
                first, vector = factors
                if isinstance(first, Diag):
                    return "torch.mul", (first.vector, vector)
                if isinstance(first, sp.Transpose) and isinstance(first.arg, PARAMETER):
                    return "torch.matmul", (vector, first.arg)
        return None

    def initial(self, initial, aged_reads):
        if self.window:
            return super().initial(initial, aged_reads)
        code = str(self.at(False)(initial.value))
        if initial.weighted:
            code = f"{self.helper('_weighted')}(keep, 0, {code})"
        return f"d_{initial.key} = {code}  # {initial.comment}"
