"""How a backend spells what the row form prints differently: one Spelling object per backend, held by every
printer of that backend (printer.RowPrinter.spelling), so that a backend's statement printers are the shared
ones with its spelling, each of a single base class, as SymPy's printers of one algebra differ by their
module's names.

This base class is NumPy's spelling; torch/printer.py and jax/printer.py hold theirs. Each method prints one
kind of node with the printer p (its _print, operand, helper, used), in the order the printer reads it.
"""

from bptt.codegen.printing.code import Code
from bptt.codegen.printing.function_code import ATOM, PRODUCT, SUM
from bptt.codegen.printing.functions import NUMPY_FUNCTIONS
from bptt.codegen.printing.products import ONES


class Spelling:
    backend = "numpy"  # the key of the helpers file
    functions = NUMPY_FUNCTIONS  # the code of the elementwise functions
    blocks = "np.s_"  # what indexes a block of a parameter

    def index_of(self, p, block):
        """What indexes a block in its parameter, np.s_[n_h:2 * n_h]; the whole parameter for None."""
        return f"{self.blocks}[{':' if block is None else p.block_index(block)}]"

    def rows_of(self, p, block):
        """What indexes a block of rows in a sequence's array: `..., n_h:2 * n_h`."""
        return p.block_index(block)

    def copy(self, p, expr):
        return Code(f"{p.operand(expr.value, ATOM)}.copy()")

    def zeros_like(self, p, expr):
        return Code(f"np.zeros_like({p._print(expr.like)})")

    def softmax(self, p, expr):
        return Code(f"{p.helper('_softmax')}({p._print(expr.arg)})")

    def one_hot(self, p, expr):
        classes = p._print(expr.shape[0])
        return Code(f"{p.helper('_onehot')}({p.label(expr.label)}, {classes}, dtype)")

    def ones_times(self, p, acc, ones):
        """A matrix of ones (rows x cols) times the vectors whose row form is the code acc: each row's sum, `rows`
        times; a reduction's 1 x 1 value broadcast (cols 1) repeated, a sum (rows 1) not repeated."""
        return self.ones_code(p, acc, ones, "{}.repeat({}, axis=-1)")

    def ones_code(self, p, acc, ones, repeat):
        rows, cols = ones.shape
        total = acc if cols == 1 else row_sums(acc)
        if rows == 1:
            return Code(total)
        return Code(repeat.format(total if getattr(total, "level", ATOM) >= ATOM else f"({total})", p._print(rows)))

    def vector_sum(self, p, term, rows):
        """A vector summed over the T*B rows: a product with ones."""
        p.used.arrays.add(ONES)
        return f"{ONES} @ {p.operand(term, ATOM)}.reshape(-1, {rows})"

    def squared_error(self, p, loss):
        difference = f"{p._print(loss.prediction)} - {p._print(loss.target)}"
        return Code(f"0.5 * (({difference}) ** 2).sum(axis=-1)", PRODUCT)

    def cross_entropy(self, p, loss):
        logits, labels = p._print(loss.prediction), p._print(loss.target)
        picked = f"np.take_along_axis({logits}, {labels}[..., None], axis=-1)[..., 0]"
        return Code(f"{p.helper('_logsumexp')}({logits}) - {picked}", SUM)


def row_sums(code):
    """The sum of the entries of each row of the row form `code`, kept as an axis of one (it broadcasts)."""
    operand = code if getattr(code, "level", ATOM) >= ATOM else f"({code})"
    return f"{operand}.sum(axis=-1, keepdims=True)"
