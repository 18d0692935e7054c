"""Print derived matrix expressions as JAX code (the JAX backend's expression printer).

The algebra is the NumPy backend's row form (printing/printer.py's RowPrinter); what differs is JAX's spelling
(SPELLING: the elementwise functions as NumPy's table writes them on jnp, softmax and one-hot from jax.nn, sums
over all steps and samples, the loss) and the names a scan's step reads (scan_read). Inside `jax.lax.scan` there
is no array indexed by t: a value at step t is the local `h_t`, at t-1 `h_prev` (the carry or a stacked input),
at t+1 `d_a_next`; jax/statements.py decides where each comes from.
"""

import sympy as sp

from bptt.codegen.printing.function_code import FunctionTable, Library, function
from bptt.codegen.printing.functions import NUMPY_FUNCTIONS
from bptt.codegen.printing.printer import ATOM, PRODUCT, SUM, Code, PrintError, RowPrinter, array_name
from bptt.codegen.printing.products import outer_factors
from bptt.codegen.printing.spelling import Spelling
from bptt.derive.nodes import Adj, OneHot, TimeSum, t, time_shift

SUFFIX = {-1: "prev", 0: "t", 1: "next"}
# NumPy's entries on jnp, the same functions by the same names but sigmoid (one table: a function registered
# for NumPy has JAX code too)
JAX = Library("jnp", sigmoid=function("jax.nn", "sigmoid"))
JAX_FUNCTIONS = FunctionTable(NUMPY_FUNCTIONS.name, JAX, NUMPY_FUNCTIONS.entries)


def step_name(node, shift):
    """The local name of a value or adjoint in a scan's step: `h_t`, `h_prev`, `d_a_next`."""
    return f"{array_name(node)}_{SUFFIX[shift]}"


def first_step_name(node):
    """The local name of an adjoint at step 1 (`d_a_1`), bound from a backward scan's final carry."""
    return f"{array_name(node)}_1"


class JaxSpelling(Spelling):
    backend, blocks, functions = "jax", "jnp.s_", JAX_FUNCTIONS

    def copy(self, p, expr):
        return Code(f"jnp.copy({p._print(expr.value)})")

    def zeros_like(self, p, expr):
        return Code(f"jnp.zeros_like({p._print(expr.like)})")

    def softmax(self, p, expr):
        return Code(f"jax.nn.softmax({p._print(expr.arg)}, axis=-1)")

    def one_hot(self, p, expr):
        p.used.sizes.add("dtype")
        return Code(f"jax.nn.one_hot({p.label(expr.label)}, {p._print(expr.shape[0])}, dtype=dtype)")

    def vector_sum(self, p, term, rows):
        return f"{p.operand(term, ATOM)}.reshape(-1, {rows}).sum(axis=0)"

    def cross_entropy(self, p, loss):
        logits, labels = p._print(loss.prediction), p._print(loss.target)
        picked = f"jnp.take_along_axis({logits}, {labels}[..., None], axis=-1)[..., 0]"
        return Code(f"jax.nn.logsumexp({logits}, axis=-1) - {picked}", SUM)

    def squared_error(self, p, loss):
        difference = f"{p._print(loss.prediction)} - {p._print(loss.target)}"
        return Code(f"0.5 * jnp.square({difference}).sum(axis=-1)", PRODUCT)


SPELLING = JaxSpelling()


def scan_read(printer, node, stored):
    """The code of a sequence's value or adjoint read by a printer in a scan's step (see JaxPrinter); stored:
    the row form's code of it, for reads the scan does not hand the step."""
    seq = node.of if isinstance(node, Adj) else node
    if not seq.time.has(t):
        if isinstance(node, Adj) and seq.name in printer.carried and seq.time == 1:
            return Code(first_step_name(node))
        if isinstance(node, Adj) and printer.aged and seq.time == 1:
            return Code(f"{printer.helper('_fresh')}({stored(node)}, ages)")
        return stored(node)
    if printer.stacked:
        return stored(node)
    shift = int(time_shift(seq.time))
    if shift not in SUFFIX:
        raise PrintError(f"a step reads {seq.name} at time {seq.time}; only t-1, t and t+1 can be scanned")
    name = step_name(node, shift)
    printer.used.arrays.add(array_name(node))
    if name not in printer.assigned:
        printer.reads.setdefault(name, (node, shift))
    return Code(name)


class JaxPrinter(RowPrinter):
    """Row form for JAX. At one step (stacked=False) every read of a time-t sequence becomes a local
    name and is recorded in `reads` (name -> (node, shift)) unless `assigned` holds it already.
    carried: the adjoints whose value at step 1 is the scan's final carry (`d_a_1`); aged: whether the other
    adjoints read at step 1 join carried ones in a window, and so enter at age 0."""

    spelling = SPELLING

    def __init__(self, stacked=False, arrays=None, carried=(), aged=False):
        super().__init__(stacked=stacked, arrays=arrays)
        self.carried = frozenset(carried)
        self.aged = aged
        self.reads = {}
        self.assigned = set()
        self.transposed = set()  # the gradient products held transposed (gradient_line)

    def sequence(self, node):
        return scan_read(self, node, super().sequence)

    def gradient_term(self, term):
        """One term of sum_t (...) of a parameter gradient: a vector summed over the T*B rows; an outer
        product u_t v_t^T as one contraction over the step and batch axes (XLA's CPU backend hands it to its
        fast GEMM, where the NumPy backend's (T*B)-long transposed product takes its slower dot: 1.5-2x on
        the GRU's weight gradients); else as the NumPy backend prints it (scatter into columns for one-hot
        inputs)."""
        if term.shape[1] == 1:
            return self.spelling.vector_sum(self, term, self._print(term.shape[0]))
        column, vector = outer_factors(term)
        if isinstance(vector, OneHot):
            return super().gradient_term(term)
        left, right = self.operand(column, ATOM), self.operand(vector, ATOM)
        return f"jnp.tensordot({left}, {right}, ((0, 1), (0, 1)))"

    def gradient_line(self, statement):
        """`name = ...` for a product of program.gradients (the gradients of a stacked weight's parameters):
        one outer product sum_t u_t v_t^T is held transposed, sum_t v_t u_t^T, and each parameter's rows of it
        read as its columns, transposed (_print_Rows). XLA's CPU backend then copies the smaller operand v to
        run its fast GEMM; a transpose of the whole product it would fold into its slower dot instead."""
        body = statement.value.body if isinstance(statement.value, TimeSum) else None
        vector = None
        if body is not None and body.shape[1] != 1 and not isinstance(body, sp.MatAdd):
            column, vector = outer_factors(body)
        if vector is None or isinstance(vector, OneHot):
            return f"{statement.target.name} = {self(statement.value)}  # {statement.comment}"
        self.transposed.add(statement.target.name)
        stacked = self.at(True)
        code = f"jnp.tensordot({stacked.operand(vector, ATOM)}, {stacked.operand(column, ATOM)}, ((0, 1), (0, 1)))"
        return f"{statement.target.name} = {code}  # {statement.comment}, transposed"

    def _print_Rows(self, expr):
        if expr.matrix.name in self.transposed:
            return Code(f"{expr.matrix.name}[:, {self.span(expr.start, expr.start + expr.count)}].T")
        return super()._print_Rows(expr)
