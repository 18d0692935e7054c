"""Print derived matrix expressions as PyTorch code (the torch backend's expression printer).

The algebra is NumPy's row form (printing/printer.py's RowPrinter): `W v` prints `v @ W.T`, and `.T` only
ever meets a 2-D parameter or a 2-D `(T*B, k)` view, so it means the same in torch. What differs is torch's
spelling (SPELLING): elementwise functions from torch's table (torch/functions.py), sums over all steps and samples,
the blocks of a parameter, the losses. Every torch printer holds it: the statements of the forward pass and of
full BPTT are printed in place by torch/statements.py; window truncation's as plain expressions into adjoint
tensors with an age axis (WindowAdjointPrinter). All run under torch.no_grad().
"""

from bptt.codegen.printing.printer import ATOM, SUM, Code, RowPrinter
from bptt.codegen.printing.spelling import Spelling
from bptt.codegen.printing.window import WindowPrinter
from bptt.codegen.torch.functions import TORCH_FUNCTIONS
from bptt.derive.nodes import SeqAt, equal


class TorchSpelling(Spelling):
    backend, functions = "torch", TORCH_FUNCTIONS

    def ones_times(self, p, acc, ones):
        return self.ones_code(p, acc, ones, "{}.repeat_interleave({}, dim=-1)")

    def index_of(self, p, block):
        """A block's index in its parameter as a tuple of slices: `(slice(n_h, 2 * n_h),)`; all for None."""
        if block is None:
            return "(slice(None),)"
        rows, columns = block.parent.shape
        ends = [block.rowslice[:2] + (rows,)]
        if columns != 1 and not (block.colslice[0] == 0 and equal(block.colslice[1], columns)):
            ends.append(block.colslice[:2] + (columns,))
        parts = ["Ellipsis"] if isinstance(block.parent, SeqAt) else []  # a sequence's value: after the batch's axes
        for start, stop, size in ends:
            first = "None" if start == 0 else p._print(start)
            last = "None" if equal(stop, size) else p._print(stop)
            parts.append(f"slice({first}, {last})")
        return "(" + ", ".join(parts) + ",)"

    def copy(self, p, expr):
        return Code(f"{p.operand(expr.value, ATOM)}.clone()")

    def zeros_like(self, p, expr):
        return Code(f"torch.zeros_like({p._print(expr.like)})")

    def softmax(self, p, expr):
        return Code(f"torch.softmax({p._print(expr.arg)}, dim=-1)")

    def vector_sum(self, p, term, rows):
        return f"{p.operand(term, ATOM)}.reshape(-1, {rows}).sum(0)"

    def cross_entropy(self, p, loss):
        logits, labels = p._print(loss.prediction), p._print(loss.target)
        picked = f"torch.gather({logits}, -1, {labels}[..., None])[..., 0]"
        return Code(f"torch.logsumexp({logits}, -1) - {picked}", SUM)


SPELLING = TorchSpelling()


class TorchPrinter(RowPrinter):
    """Row form in torch: one step (`stacked=False`) or all steps t = 1..T at once."""

    spelling = SPELLING


class WindowAdjointPrinter(WindowPrinter):
    """The plain backward statements (ir.Assign, Accumulate, Flow, Loop, Guard) as torch lines for window
    truncation: the recurrent adjoints carry an age axis (printing/window.py), written into zero tensors."""

    spelling = SPELLING
