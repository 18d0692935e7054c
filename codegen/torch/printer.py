"""Print derived matrix expressions as PyTorch code (the torch backend's expression printers).

The algebra is NumPy's row form (numpy_printer.RowPrinter): `W v` prints `v @ W.T`, and `.T` only
ever meets a 2-D parameter or a 2-D `(T*B, k)` view, so it means the same in torch. What differs is
printed here: elementwise functions from torch's table (torch/functions.py), sums over all steps and samples,
the one-hot lookups and scatters, the losses. The statements of the forward pass and of full BPTT are
printed in place by torch/statements.py; window truncation's as plain expressions into adjoint tensors
with an age axis (WindowAdjointPrinter). All run under torch.no_grad().
"""

from bptt.codegen.printing.printer import ATOM, SUM, Code, RowPrinter
from bptt.codegen.printing.window import WindowPrinter
from bptt.codegen.torch.functions import TORCH_FUNCTIONS
from bptt.derive.nodes import equal


class TorchPrinter(RowPrinter):
    """Row form in torch: one step (`stacked=False`) or all steps t = 1..T at once."""

    backend, functions = "torch", TORCH_FUNCTIONS

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


class WindowAdjointPrinter(WindowPrinter, TorchPrinter):
    """The plain backward statements (ir.Assign, Accumulate, Flow, Loop, Guard) as torch lines for window
    truncation: the recurrent adjoints carry an age axis (printing/window.py), written into zero tensors."""
