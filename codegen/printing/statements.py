"""Print ir statements as code that works in place: NumPy's, or torch's under torch.no_grad() (the base of
torch/statements.py's printer).

Every value is computed into an array that already exists: `np.matmul(a, b, out=c)`,
`np.tanh(c, out=c)`, `np.add(c, d, out=c)`; intermediate results go to scratch arrays
of one step (or, outside a loop, of all steps) that the workspace keeps. Products over
all steps run on 2-D `(T*B, k)` views. Nothing is allocated in the loop. The library's
calls come from its table (array_calls.py's NumPy's, torch/calls.py's), and its expressions are spelled as
its backend spells them (spelling.py).
"""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.codegen.ir import PARAMETER, Array, PerCall
from bptt.codegen.printing.array_calls import NUMPY
from bptt.codegen.printing.code import no_factor_code, tuple_items
from bptt.codegen.printing.function_code import in_place
from bptt.codegen.printing.printer import ATOM, Code
from bptt.codegen.printing.spelling import row_sums
from bptt.codegen.printing.terms import Scratch, constant, first_term, negated
from bptt.codegen.printing.units import REDUCED, UnitsStatements, broadcast_value, of_units, per_call, placed_rows
from bptt.codegen.printing.window import Statements
from bptt.derive.blocks import split
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import Adj, Diag, OneHot, SeqAt, Softmax, t, time_shift
from bptt.derive.norm_adjoint import NormAdjoint
from bptt.derive.reductions import Reduce

VIEWS_PER_LINE = 5  # a step's views are bound five to a line: `h_t, h_prev, ... = h[t], h[t - 1], ...`


def bound_views(views):
    """The lines binding a step's views ({subscript: local name}), a few to a line."""
    pairs = list(views.items())
    lines = []
    for start in range(0, len(pairs), VIEWS_PER_LINE):
        chunk = pairs[start : start + VIEWS_PER_LINE]
        lines.append(f"{', '.join(name for _, name in chunk)} = {', '.join(code for code, _ in chunk)}")
    return lines


class InPlacePrinter(UnitsStatements, Statements):
    """Statements (`_print_Assign`, `_print_Loop`, ...) as lines of NumPy code, in place.

    arrays: the ir.Arrays the statements work in (groups bring their members and spans);
    accepts_out: names of helpers that take an `out=` array. `calls`: the library's table."""

    calls = NUMPY

    def __init__(self, arrays=(), accepts_out=frozenset(), stacks=(), taken=frozenset()):
        self.stacks = {stack.name: stack for stack in stacks}
        self.taken = frozenset(taken)  # names a step's views must not take (the model's, the arrays')
        self.views = None  # in a loop: {subscript: the local name of that step's view}
        self.prepared = {}  # name -> (the line that makes it, its Array): stacked and transposed weights
        self.once = {}  # a reduction that reads no step -> the name of its array, made once per call (units.py)
        table = {}
        for array in arrays:
            table[array.name] = array
            table.update({name: Array(name, rows, array.steps) for name, rows in array.members})
            table.update({name: Array(name, None, array.steps) for name, _, _ in array.spans})
        super().__init__(stacked=True, arrays=table)
        self.accepts_out = accepts_out
        self.scratch = Scratch(self.used.arrays)

    # statements

    def _print_Loop(self, loop):
        """The loop, each step's views of the arrays (at t and t-1) taken once at its top."""
        head, body = self.loop_parts(loop)
        return [head] + ["    " + line for line in body]

    def loop_parts(self, loop):
        """(the loop's `for` line, its body's lines, unindented)."""
        self.used.sizes.add("T")
        inner = self.at(False)
        inner.views = {}
        body = inner.lines(loop.body)
        head = "for t in range(T, 0, -1):" if loop.backward else "for t in range(1, T + 1):"
        return head, bound_views(inner.views) + body

    def sequence(self, node):
        code = super().sequence(node)
        seq = node.of if isinstance(node, Adj) else node
        if self.views is None or self.stacked or not seq.time.has(t):
            return code
        shift = time_shift(seq.time)
        if shift not in (0, -1):
            return code  # step t+1 exists only for t < T: read where it is read
        if code not in self.views:
            name = f"{self.array(node).name}_{'t' if shift == 0 else 'prev'}"
            while name in self.taken or name in self.arrays or name in self.views.values():
                name += "_"
            self.views[code] = name
        return Code(self.views[code])

    def _print_Assign(self, statement):
        out = self(statement.target)
        lines = self.emit(statement.value, out, statement.target.rows, statement.target)
        return self.commented(statement, lines)

    def _print_Accumulate(self, statement):
        out = self(statement.target)
        return self.commented(statement, self.add_into(out, statement.value, statement.target.rows))

    def _print_Flow(self, statement):
        out, rows = self(statement.target), statement.target.rows
        flow = self.scratch.take(rows, self.stacked)
        lines = self.emit(statement.value, flow, rows)
        lines += ["if keep is not None:", f"    {flow} *= keep[t]", self.calls.line("add", a=out, b=flow, out=out)]
        self.used.sizes.add("T")  # the flow only exists for t < T
        return self.commented(statement, lines)

    def _print_MatrixSymbol(self, expr):
        if expr.name in self.stacks:
            return Code(self.prepare(expr, transposed=False))
        return super()._print_MatrixSymbol(expr)

    def prepare(self, matrix, transposed):
        """The name of a weight made once per call: a stack of gate weights, or a weight's transpose
        (contiguous: BLAS multiplies by it faster than by a transposed view). Returns its name."""
        stack = self.stacks.get(matrix.name)
        name = f"_{matrix.name.lstrip('_')}_T" if transposed else matrix.name
        if name not in self.prepared:
            rows, cols = matrix.shape
            if stack is None:
                line = self.calls.line("copy", out=name, x=f"{super()._print_MatrixSymbol(matrix)}.T")
            else:
                parts = tuple_items(
                    f"{self.operand(part, ATOM)}.T" if transposed else self(part) for part in stack.parts
                )
                line = self.calls.line("concatenate_columns" if transposed else "concatenate", parts=parts, out=name)
            shape = (cols, rows) if transposed else (rows, cols)
            self.prepared[name] = (line, Array(name, shape[0], PerCall(shape[1])))
        self.used.arrays.add(name)
        return name

    def number(self, value):
        """The code of a number that is an operand of a call (torch's printer: a tensor, in a loop)."""
        return self(value)

    def commented(self, statement, lines):
        self.scratch.release()
        return ([f"# {statement.comment}"] if statement.comment else []) + lines

    # values into arrays

    def ref(self, expr):
        """The code of expr if it is stored as it is (a sequence value, an adjoint, a parameter); with in-place
        reductions, a stored 1 x 1 value broadcast into n rows (1 mu_t) is that value, which broadcasts. A reduction
        that reads no step (mean(g) of a parameter) is stored once per call."""
        if isinstance(expr, (SeqAt, Adj, *PARAMETER)):
            return self(expr)
        if per_call(expr):
            return Code(self.reduced_once(expr))
        if self.calls.sum_units and broadcast_value(expr) is not None:
            return self.ref(broadcast_value(expr))
        return None

    def rows2d(self, code, rows):
        """A 2-D (T*B, rows) view for products over all steps; the array itself at one step."""
        return Code(f"{code}.reshape(-1, {self(rows)})") if self.stacked else code

    def emit(self, expr, out, rows, self_ref=None):
        """Lines that compute expr into the array `out`. self_ref: a target whose current contents expr reads."""
        if expr == self_ref:
            return []
        code = self.ref(expr)
        if code is not None:
            return [] if code == out else [self.calls.line("copy", out=out, x=code)]
        if isinstance(expr, sp.ZeroMatrix):
            return [self.calls.line("zero", out=out)]
        if isinstance(expr, NormAdjoint) and self.takes_out((None, "_norm_adjoint")):
            return self.emit_norm_adjoint(expr, out, rows)
        if isinstance(expr, Reduce) and expr.name in REDUCED and self.calls.sum_units:
            return self.emit_reduce(expr, out)
        if of_units(expr) and not self.calls.sum_units and (self_ref is None or not expr.has(self_ref)):
            # a norm's part as one expression, in a library whose table has no in-place reduction
            return [f"{out}[...] = {self(expr)}"]
        if placed_rows(expr):
            return self.emit_placed(split(expr)[1], out)
        if isinstance(expr, sp.MatAdd):
            return self.emit_sum(list(expr.args), out, rows, self_ref)
        if isinstance(expr, sp.MatMul):
            return self.emit_product(expr, out, rows)
        if isinstance(expr, sp.HadamardProduct):
            return self.emit_hadamard(list(expr.args), out, rows)
        if isinstance(expr, sp.HadamardPower):
            base, lines = self.operand_into(expr.base, out, rows)
            named = {2: "square", sp.S.Half: "sqrt"}.get(expr.exp)
            call = self.calls.line(named or "power", x=base, p=expr.exp, out=out)
            return lines + [call]
        if isinstance(expr, Apply):
            return self.emit_apply(expr, out, rows, self_ref)
        if isinstance(expr, Softmax):
            arg, lines = self.operand_into(expr.arg, out, rows)
            return lines + [f"{self.helper('_softmax')}({arg}, out={out})"]
        if isinstance(expr, OneHot):
            return [
                f"{self.helper('_onehot')}({self.label(expr.label)}, {self(expr.shape[0])}, {out}.dtype, out={out})"
            ]
        return [f"{out}[...] = {self(expr)}"]

    def operand_into(self, expr, out, rows):
        """(code, lines): expr's code if stored, else lines computing it into out."""
        code = self.ref(expr)
        return (code, []) if code is not None else (out, self.emit(expr, out, rows))

    def add_into(self, out, expr, rows, sign="add"):
        """Lines for out += expr (or -=)."""
        code = self.ref(expr)
        if code is None and constant(expr) is not None:
            code = self.number(constant(expr))
        lines = []
        if code is None:
            code = self.scratch.take(rows, self.stacked)
            lines = self.emit(expr, code, rows)
        return lines + [self.calls.line(sign, a=out, b=code, out=out)]

    def emit_sum(self, terms, out, rows, self_ref):
        first = first_term(terms, self_ref)
        rest = [term for term in terms if term is not first]
        scalar = next((term for term in rest if constant(term) is not None), None)
        second = next((term for term in rest if self.ref(negated(term) or term) is not None), None)
        computed = next((term for term in rest if negated(term) is None and constant(term) is None), None)
        if self.ref(first) is not None and first != self_ref and second is None and computed is not None:
            first, rest = computed, [term for term in terms if term is not computed]  # no copy: add the stored one
        if self.ref(first) is not None and first != self_ref and second is not None:  # a + b (or a - b) in one call
            sign = "subtract" if negated(second) is not None else "add"
            lines = [self.calls.line(sign, a=self.ref(first), b=self.ref(negated(second) or second), out=out)]
            rest.remove(second)
        elif negated(first) is not None and scalar is not None:
            value, lines = self.operand_into(negated(first), out, rows)
            lines = lines + [
                line.format(c=self.number(constant(scalar)), x=value, out=out) for line in self.calls.minus_from
            ]
            rest.remove(scalar)
        elif negated(first) is not None:
            lines = self.emit(negated(first), out, rows, self_ref) + [self.calls.line("negative", x=out, out=out)]
        else:
            lines = self.emit(first, out, rows, self_ref)
        for term in rest:
            minus = negated(term)
            lines += self.add_into(out, term if minus is None else minus, rows, "add" if minus is None else "subtract")
        return lines

    def emit_product(self, expr, out, rows):
        coeff, factors = expr.as_coeff_matrices()
        if isinstance(factors[-1], OneHot):
            lines, factors = [self.take_columns(factors[-2], factors[-1], out)], factors[:-2]
            acc, acc_rows = out, rows
        else:
            acc_rows = factors[-1].shape[0]  # a 1 x 1 value broadcast by ones(n x 1) is computed in its own rows
            broadcast = len(factors) > 1 and isinstance(factors[-2], OneMatrix) and acc_rows == 1
            broadcast = broadcast and self.ref(factors[-1]) is None
            into = self.scratch.take(acc_rows, self.stacked) if broadcast else out
            acc, lines = self.operand_into(factors[-1], into, acc_rows)
            factors = factors[:-1]
        for k, factor in enumerate(reversed(factors)):
            last = k == len(factors) - 1
            gemm_next = not last and not isinstance(factors[len(factors) - k - 2], Diag)
            in_out = last or (not gemm_next and not (factor.shape[0] == 1 != rows))  # a 1 x 1 midway: own rows
            dest = out if in_out else self.scratch.take(factor.shape[0], self.stacked)
            if isinstance(factor, Diag):
                vector = self.ref(factor.vector)
                if vector is None:
                    vector = self.scratch.take(factor.shape[0], self.stacked)
                    lines += self.emit(factor.vector, vector, factor.shape[0])
                lines.append(self.calls.line("multiply", a=vector, b=acc, out=dest))
            elif isinstance(factor, OneMatrix):  # each row's sum, broadcast into its rows
                if acc == dest:
                    dest = self.scratch.take(factor.shape[0], self.stacked)
                # a 1 x 1 value (which acc may hold broadcast already) is copied into the rows, not summed
                total = acc if factor.shape[1] == 1 else row_sums(acc)
                lines.append(self.calls.line("copy", out=dest, x=total))
            else:
                if acc == dest:
                    dest = self.scratch.take(factor.shape[0], self.stacked)
                lines.append(self.gemm(factor, acc, acc_rows, dest, factor.shape[0]))
            acc, acc_rows = dest, factor.shape[0]
        if acc != out:
            lines.append(self.calls.line("copy", out=out, x=acc))
        if coeff != 1:
            lines.append(self.calls.line("multiply", a=out, b=self.number(coeff), out=out))
        return lines

    def gemm(self, factor, acc, acc_rows, dest, rows):
        """dest = factor times the vectors in acc (row form: acc @ factor^T)."""
        matrix = self.gemm_matrix(factor)
        call = "step_matmul" if not self.stacked and dest in self.scratch.arrays else "matmul"
        return self.calls.line(call, a=self.rows2d(acc, acc_rows), b=matrix, out=self.rows2d(dest, rows))

    def gemm_matrix(self, factor):
        """The code of factor^T, what the row form multiplies by (`acc @ W.T` for W acc)."""
        if isinstance(factor, sp.Transpose) and isinstance(factor.arg, PARAMETER):
            return self(factor.arg)
        if isinstance(factor, sp.MatrixSymbol) and not self.stacked:  # the transpose pays off over T steps
            return self.prepare(factor, transposed=True)
        if isinstance(factor, PARAMETER):
            return f"{self(factor)}.T"
        raise no_factor_code(factor)

    def take_columns(self, matrix, onehot, out):
        """P onehot(x): column x of P, looked up (never a one-hot vector; np.take would copy P.T whole)."""
        return self.calls.line("copy", out=out, x=self.lookup(matrix, onehot))

    def emit_hadamard(self, args, out, rows):
        divisors = [self.divisor(arg) for arg in args]
        kept = [arg for arg, divisor in zip(args, divisors, strict=True) if divisor is None]
        if kept and len(kept) < len(args):  # x * 1 sigma^(-1): x / sigma, sigma broadcast
            lines = self.emit_hadamard(kept, out, rows) if len(kept) > 1 else self.emit(kept[0], out, rows)
            return lines + [self.calls.line("divide", a=out, b=d, out=out) for d in divisors if d is not None]
        stored = [self.ref(arg) for arg in args if self.ref(arg) is not None]
        computed = [arg for arg in args if self.ref(arg) is None]
        lines = []
        if computed:
            lines = self.emit(computed[0], out, rows)
            left = out
        else:
            lines, left, stored = [self.calls.line("multiply", a=stored[0], b=stored[1], out=out)], out, stored[2:]
        for code in stored:
            lines.append(self.calls.line("multiply", a=left, b=code, out=out))
        for arg in computed[1:]:
            lines += self.add_into(out, arg, rows, "multiply")
        return lines

    def divisor(self, factor):
        """The code of v for a factor v^(-1) (or 1 v^(-1), broadcast) of a stored v, if the table divides; else None."""
        power = broadcast_value(factor) or factor
        if not (self.calls.divide and isinstance(power, sp.HadamardPower) and power.exp == -1):
            return None
        return self.ref(power.base)

    def emit_apply(self, expr, out, rows, self_ref):
        arg = self.ref(expr.arg) if expr.arg != self_ref else out
        lines = []
        if arg is None:
            lines, arg = self.emit(expr.arg, out, rows, self_ref), out
        x, code = self.elementwise(expr.function, arg)
        call = in_place(code, x, out, self.takes_out)
        if call is not None:
            return lines + [call]
        return lines + ([] if code.text == out else [f"{out}[...] = {code.text}"])

    def takes_out(self, function):
        """Whether a library function or helper, (module, name), takes out=: the library's table says, or
        the helpers file (accepts_out)."""
        module, name = function
        if module is None:
            return name in self.accepts_out
        return module == self.calls.module and self.calls.takes_out(name)
