"""Print derived matrix expressions as batched NumPy code (the NumPy backend's expressions).

A column vector v of the maths is an array whose last axis holds v and whose
leading axes are the batch (and, when stacked, time): "row form". So W v
prints as `v @ W.T`, W^T v as `v @ W`, diag(u) v as `u * v`, and one printed
expression serves a single step (`h[t]`) or all steps at once (`h[1:]`).
Parentheses follow from the precedence of the node printed, never from its text.
"""

import functools

import sympy as sp

from bptt.codegen.array_names import adjoint_array
from bptt.codegen.ir import Array, Steps
from bptt.codegen.printing.code import Code, PrintError, unspecified_loss
from bptt.codegen.printing.function_code import ATOM, POWER, PRODUCT, SUM, UNARY, Term
from bptt.codegen.printing.products import ProductPrinting, unbroadcast
from bptt.codegen.printing.spelling import Spelling
from bptt.codegen.printing.used import Used
from bptt.derive.blocks import split
from bptt.derive.elementwise import lookup, power
from bptt.derive.nodes import Adj, SeqAt, equal, matrix_sum, t, time_shift
from bptt.derive.order import term_order
from bptt.derive.text import described

# Arrays of states and intermediates hold steps 0..T (index = time);
# inputs, outputs and targets hold steps 1..T (index = time - 1).
ALIGNED = ("state", "intermediate")


@functools.lru_cache(maxsize=1024)  # str() of a SymPy symbol makes a printer; every printed size asks
def size_name(symbol):
    return f"n_{symbol}"


def array_name(node):
    """The array holding a sequence value or its adjoint: `h`, `d_h` (`_d_x` for an internal `_x`)."""
    if isinstance(node, Adj):
        return adjoint_array(node.of.name)
    return node.name


@functools.lru_cache(maxsize=4096)  # a printer asks for every sequence it prints; an Array is frozen
def default_array(name, rows, role):
    """The array of a sequence's values (or adjoints) that no ir.Array places: named `name`, aligned by its role
    (remembered by these, not by the node: a node equal to one met before was compared with it argument by
    argument)."""
    return Array(name, rows, Steps.FROM_ZERO if role in ALIGNED else Steps.FROM_ONE)


class RowPrinter(ProductPrinting):
    """Prints expressions at one step (`stacked=False`, time variable `t`) or for all steps
    t = 1..T at once (`stacked=True`). `arrays` says where each sequence lives (ir.Array
    by array name); it records the parameters, sizes, arrays and helpers it prints in `used` (a Used).
    spelling: how its backend spells what backends print differently (spelling.py; NumPy's here)."""

    printmethod = None
    spelling = Spelling()

    def __init__(self, stacked=False, arrays=None):
        super().__init__()
        self.stacked = stacked
        self.arrays = dict(arrays or {})
        self.used = Used()

    def __call__(self, expr):
        return str(self._print(expr))

    def at(self, stacked):
        """The same printer, stacked or at one step."""
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.stacked = stacked
        return other

    def operand(self, expr, level):
        code = self._print(expr)
        return code if code.level >= level else Code(f"({code})")

    def helper(self, name):
        self.used.helpers.add(name)
        return name

    def array(self, node):
        name = array_name(node)
        self.used.arrays.add(name)
        found = self.arrays.get(name)
        if found is None:
            seq = node.of if isinstance(node, Adj) else node
            found = default_array(name, seq.rows, seq.role)
        return found

    # sequences and names

    def _print_SeqAt(self, node):
        return self.sequence(node)

    def _print_Adj(self, node):
        return self.sequence(node)

    def sequence(self, node):
        seq = node.of if isinstance(node, Adj) else node
        array = self.array(node)
        if array.steps is Steps.ONE:
            if self.stacked:
                raise PrintError(f"{array.name} holds one step; it cannot be read for all steps at once")
            return Code(array.name)
        offset = sp.S.One if array.steps is Steps.FROM_ONE else sp.S.Zero
        if not self.stacked or not seq.time.has(t):
            return Code(f"{array.name}[{index_text(seq.time - offset)}]")
        shift = time_shift(seq.time)
        if shift == 0:
            return Code(f"{array.name}[1:]" if array.steps is Steps.FROM_ZERO else array.name)
        if shift == -1 and array.steps is Steps.FROM_ZERO:
            return Code(f"{array.name}[:-1]")
        raise PrintError(f"cannot stack {array.name} at time {seq.time} over t = 1..T")

    def label(self, node):
        return self._print(node)

    def _print_MatrixSymbol(self, expr):
        self.used.params.add(expr.name)
        return Code(expr.name)

    def _print_Symbol(self, expr):
        if expr.name in ("T", "B"):
            self.used.sizes.add(expr.name)
        if expr.name in ("t", "T", "B"):
            return Code(expr.name)
        self.used.sizes.add(expr.name)
        return Code(size_name(expr))

    def _print_Integer(self, expr):
        return Code(str(expr), ATOM if expr >= 0 else UNARY)

    def _print_Float(self, expr):
        return Code(repr(float(expr)), ATOM if expr >= 0 else UNARY)

    def _print_Rational(self, expr):
        return self.fraction(expr)

    def _print_Mul(self, expr):
        return self.fraction(expr)

    def _print_Pow(self, expr):
        return self.fraction(expr)

    def fraction(self, expr):
        """A scalar: 1 / T, -1 / T, 2 * n_h."""
        if expr.is_Rational and expr.q & (expr.q - 1) == 0:  # a power of two below: exact as a float
            return Code(repr(float(expr)), ATOM if expr > 0 else UNARY)
        numerator, denominator = sp.fraction(expr)
        if denominator == 1 and expr.is_Pow:  # a root, s^(1/2) (a 1 x 1 value that became a scalar)
            return Code(f"{self.operand(expr.base, ATOM)} ** {self.operand(expr.exp, UNARY)}", POWER)
        if denominator == 1:
            coeff, rest = numerator.as_coeff_Mul()
            return Code(f"{coeff} * {self.operand(rest, POWER)}", PRODUCT)
        return Code(f"{self.operand(numerator, POWER)} / {self.operand(denominator, POWER)}", PRODUCT)

    def _print_Add(self, expr):
        """A time index (t + 1), or a sum of sizes (a row of a stacked value: n_d + n_h)."""
        if all(symbol.name in ("t", "T", "B") for symbol in expr.free_symbols):
            return Code(index_text(expr), SUM)
        return Code(" + ".join(str(self.operand(term, SUM)) for term in expr.as_ordered_terms()), SUM)

    def _print_OneMatrix(self, expr):
        return Code("1")

    def _print_Identity(self, expr):
        """The 1 x 1 identity SymPy makes of c * OneMatrix(1, 1), the scalar c in a sum of 1 x 1 values."""
        if expr.shape != (1, 1):
            return self.emptyPrinter(expr)
        return Code("1")

    def _print_Rows(self, expr):
        return Code(f"{self._print(expr.matrix)}[{self.span(expr.start, expr.start + expr.count)}]")

    def _print_MatrixSlice(self, expr):
        """A block of a parameter: a view, W_ih[n_h:2 * n_h]; rows of a sequence's value, a_t[..., :n_h]."""
        return Code(f"{self._print(expr.parent)}[{self.block_index(expr)}]")

    def block_index(self, block):
        """The index of a block in its parameter: a vector's rows, a matrix's rows and columns (`n_h:2 * n_h`); in a
        sequence's value, its rows after the batch's axes (`..., :n_h`)."""
        rows, columns = block.parent.shape
        spans = ["..."] if isinstance(block.parent, SeqAt) else []
        spans.append(self.span(*block.rowslice[:2], size=rows))
        if columns != 1 and not (block.colslice[0] == 0 and equal(block.colslice[1], columns)):
            spans.append(self.span(*block.colslice[:2], size=columns))
        return ", ".join(spans)

    def span(self, start, stop, size=None):
        """`a:b`, the ends left out where they are the array's."""
        first = "" if start == 0 else self._print(start)
        last = "" if size is not None and equal(stop, size) else self._print(stop)
        return f"{first}:{last}"

    # the algebra, in row form

    def _print_Placed(self, expr):
        return self.placed([], [expr])

    def placed(self, whole, placed):
        """A sliced parameter's gradient: each block's value written into its rows and columns, the rest zero."""
        parameter = placed[0].block.parent
        blocks = [(self.index_of(None), matrix_sum(whole))] if whole else []
        blocks += [(self.index_of(p.block), p.value) for p in placed]
        listed = ", ".join(f"({index}, {self._print(value)})" for index, value in blocks)
        return Code(f"{self.helper('_placed')}({self._print(parameter)}, {listed})")

    def index_of(self, block):
        """What indexes a block in its parameter (np.s_[n_h:2 * n_h]); the whole parameter for None."""
        return self.spelling.index_of(self, block)

    def _print_MatAdd(self, expr):
        whole, placed = split(expr)
        if placed:
            return self.placed(whole, placed)
        out = ""
        for term in sorted(unbroadcast(expr.args), key=term_order):
            negative = isinstance(term, sp.MatMul) and bool(term.args[0].is_negative)
            if negative:
                code = self.operand(negated(term), PRODUCT if out else POWER)
                out += f" - {code}" if out else f"-{code}"
            else:
                out += f" + {self._print(term)}" if out else str(self._print(term))
        return Code(out, SUM)

    def _print_Copy(self, expr):
        return self.spelling.copy(self, expr)

    def _print_ZerosLike(self, expr):
        return self.spelling.zeros_like(self, expr)

    def _print_HadamardProduct(self, expr):
        return Code(" * ".join(self.operand(arg, POWER) for arg in unbroadcast(expr.args)), PRODUCT)

    def _print_HadamardPower(self, expr):
        _, code = self.elementwise(power(expr.exp), self._print(expr.base))
        return Code(code.text, code.level)

    def _print_NormAdjoint(self, expr):
        """A norm's Jacobian times a vector, (g − mean(g) − x̂ mean(x̂ ⊙ g)) / σ: one call of the runtime's
        _norm_adjoint (O(n), no n x n matrix), whose code each backend's runtime holds."""
        g, hat, sigma = (self._print(arg) for arg in (expr.g, expr.hat, expr.sigma))
        centred = "" if expr.centred else ", centred=False"
        return Code(f"{self.helper('_norm_adjoint')}({g}, {hat}, {sigma}{centred})")

    def _print_Reduce(self, expr):
        """A reduction over the units (mean, sum): the last axis, kept (it broadcasts); O(n), no ones."""
        _, code = self.elementwise(expr.reduction, self._print(expr.arg))
        return Code(code.text, code.level)

    def _print_Apply(self, expr):
        _, code = self.elementwise(expr.function, self._print(expr.arg))
        return Code(code.text, code.level)

    def elementwise(self, function, arg):
        """(x, code): the printed argument `arg` as a Term x, and the code of the elementwise function of x from
        this backend's table (printing/functions.py for NumPy), the helpers it calls recorded. function: the
        registry's name, or its entry (a power's)."""
        entry = lookup(function) if isinstance(function, str) else function
        function = entry.name
        functions = self.spelling.functions
        if entry.kind not in functions:
            raise PrintError(
                f"the elementwise function {function!r} has no code; "
                f"add it with {functions.name}.register({entry.kind!r}, lambda xp, x: ...)"
            )
        x = Term(str(arg), getattr(arg, "level", ATOM))
        code = functions.code(entry, x)
        for name in sorted(code.helpers):
            self.helper(name)
        return x, code

    def _print_Softmax(self, expr):
        return self.spelling.softmax(self, expr)

    def _print_OneHot(self, expr):
        return self.spelling.one_hot(self, expr)

    def _print_SquaredError(self, loss):
        return self.spelling.squared_error(self, loss)

    def _print_SoftmaxCrossEntropy(self, loss):
        return self.spelling.cross_entropy(self, loss)

    def _print_GenericLoss(self, loss):
        raise unspecified_loss(loss)

    def emptyPrinter(self, expr):
        raise PrintError(f"{described(expr)} has no code yet", expr)


@functools.lru_cache(
    maxsize=8192
)  # -term rebuilds the whole term (a deep doit), and every backend prints the same terms
def negated(term):
    return -term


@functools.lru_cache(maxsize=8192)  # printing a time index (expand, then str) is slow; the same few recur
def index_text(expr):
    """A time index as code, expanded (`t - 1`)."""
    return Code(str(sp.expand(expr)), SUM)
