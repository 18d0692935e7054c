"""compile=True: the torch module runs each step of its loops as one function through torch.compile.

_forward_step and _adjoints_step are printed here from the loop's statements, as plain torch expressions
written into the step's views (copy_, add_), which torch.compile fuses: on a GPU the pointwise work of a
step is one kernel, the matrix products stay library calls. A step function takes one view of each tensor
it reads, the rows of the steps it reads (`h[t - 1 : t + 1]`: h_prev and h_t), and takes its views of
those itself (a stacked tensor's members too): torch.compile mishandles inputs that share memory and are
written, and a whole tensor would be copied back at every step. The backward loop's step T, into which no
step t+1 flows (or the segment after does), runs as printed in place. (torch.compile takes no `out=` into
a view of a stacked tensor, which the in-place loop writes, so the step is printed in this form of its own.)
"""

from dataclasses import dataclass

import sympy as sp

from bptt.codegen.ir import Steps
from bptt.codegen.printing.code import Code, PrintError
from bptt.codegen.printing.function_code import POWER, PRODUCT
from bptt.codegen.printing.printer import index_text
from bptt.codegen.printing.statements import bound_views
from bptt.codegen.printing.terms import constant
from bptt.codegen.printing.window import Statements
from bptt.codegen.torch.printer import SPELLING
from bptt.codegen.torch.sums import WEIGHTS
from bptt.derive.nodes import Adj, t, time_shift

SUFFIXES = {-1: "prev", 0: "t", 1: "next"}  # a view's name by its step: h_prev, h_t, h_next
WEIGHT = "keep_t"  # a backward step's argument: keep[t], the weight of the flows from step t+1 (runtime's _as_input)


@dataclass(frozen=True)
class StepFunction:
    """A step of a loop as a module-level function: its name, its arguments ({name: the caller's code}),
    its body, and whether it holds the flows from step t+1 (so it runs for t < T only)."""

    name: str
    args: dict
    body: tuple
    flows: bool

    def lines(self):
        """The function's definition."""
        doc = (
            '"""Step t of the loop, for compile=True (torch.compile fuses it): '
            'each tensor as the rows of the steps read."""'
        )
        return (f"def {self.name}({', '.join(self.args)}):", "    " + doc, *("    " + line for line in self.body))

    def call(self):
        """The lines at the top of the loop's body that run the step compiled, when it is."""
        test, why = (
            ("_step is not None and t < T", "  # step T as written") if self.flows else ("_step is not None", "")
        )
        return [f"if {test}:{why}", f"    _step({', '.join(self.args.values())})", "    continue"]


class StepPrinter(Statements):
    """The statements of a loop's step t as plain torch code over views at t - 1, t and t + 1 (a member of a
    stacked tensor as its rows of it), bound at the top from one argument per tensor; parameters, sizes and
    the stacked and transposed weights that `eager`, the in-place printer of the loop, makes once per call,
    by name."""

    spelling = SPELLING

    def __init__(self, eager):
        super().__init__(stacked=False, arrays=eager.arrays)
        self.eager = eager
        self.args = {}  # name -> the caller's code: parameters, sizes
        self.views = {}  # (tensor, step shift, rows or None) -> the view's name
        self.offsets = {}  # tensor -> its index's offset (1: steps 1..T)
        self.flows = False

    def function(self, name, statements):
        body = self.lines(statements)
        args, bindings = {}, {}
        for base, shifts in self.tensors().items():
            first, last, offset = min(shifts), max(shifts), self.offsets[base]
            if first == last:
                arg = self.views.get((base, first, None)) or self.fresh(f"{base}_{SUFFIXES[first]}", args)
                args[arg] = f"{base}[{index_text(t + first - offset)}]"
            else:
                arg = self.fresh(f"{base}_steps", args)
                args[arg] = f"{base}[{index_text(t + first - offset)} : {index_text(t + last + 1 - offset)}]"
            for (tensor, shift, rows), view in self.views.items():
                row = arg if first == last else f"{arg}[{shift - first}]"
                if tensor == base and view != arg:
                    bindings[row + ("" if rows is None else f"[..., {self.span(*rows)}]")] = view
        args.update(self.args)
        args.update({WEIGHT: f"{WEIGHTS}[t]"} if self.flows else {})
        return StepFunction(name, args, tuple(bound_views(bindings) + body), self.flows)

    def tensors(self):
        """{tensor: the step shifts the step reads it at}, in the order of first use."""
        shifts = {}
        for base, shift, _ in self.views:
            shifts.setdefault(base, set()).add(shift)
        return shifts

    def fresh(self, name, more=()):
        """name, or name_ (name__, ...) where the model, the arrays or the step's names take it."""
        taken = set(self.eager.taken) | set(self.arrays) | set(self.args) | set(self.views.values()) | set(more)
        while name in taken:
            name += "_"
        return name

    def _print_Guard(self, guard):  # only steps t < T run compiled: step t+1 exists
        self.flows = True
        return self.lines(guard.body)

    _print_Boundary = _print_Guard  # the segment after's values are read at step T, which runs as written

    def _print_Assign(self, statement):
        target, value = self(statement.target), statement.value
        code = f"{target}.zero_()" if isinstance(value, sp.ZeroMatrix) else f"{target}.copy_({self(value)})"
        return commented(statement, code)

    def _print_Accumulate(self, statement):
        target = self(statement.target)
        return commented(statement, f"{target}.add_({self(statement.value)})")

    def _print_Flow(self, statement):
        target = self(statement.target)
        return commented(statement, f"{target}.add_({WEIGHT} * {self.operand(statement.value, POWER)})")

    def sequence(self, node):
        """The name of the view of a value at t - 1, t or t + 1 (h_prev, i_t), bound at the function's top."""
        seq = node.of if isinstance(node, Adj) else node
        array = self.array(node)
        shift = time_shift(seq.time)
        if shift not in SUFFIXES or array.steps in (Steps.ONE, Steps.ONES):
            raise PrintError(f"a step function reads {array.name} at {seq.time}, not as a step of a tensor")
        base, rows = self.eager.groups.get(array.name, (array.name, None))
        self.offsets[base] = 1 if array.steps is Steps.FROM_ONE else 0
        key = (base, int(shift), rows)
        if key not in self.views:
            self.views[key] = self.fresh(f"{array.name}_{SUFFIXES[int(shift)]}")
        return Code(self.views[key])

    def _print_MatMul(self, expr):
        value = constant(expr)  # c 1: the number c, broadcast
        return super()._print_MatMul(expr) if value is None else self._print(value)

    def _print_MatrixSymbol(self, expr):
        name = self.eager.prepare(expr, transposed=False) if expr.name in self.eager.stacks else expr.name
        self.args[name] = name
        return Code(name)

    def _print_Symbol(self, expr):
        code = super()._print_Symbol(expr)
        if code not in ("t", "T", "B"):
            self.args[str(code)] = str(code)
        return code

    def apply(self, factor, acc, expr):
        """W acc by the transpose of W that the in-place loop multiplies by (made once per call)."""
        if not isinstance(factor, sp.MatrixSymbol):
            return super().apply(factor, acc, expr)
        matrix = self.eager.prepare(factor, transposed=True)
        self.args[matrix] = matrix
        return Code(f"{acc if acc.level >= PRODUCT else f'({acc})'} @ {matrix}", PRODUCT)


def commented(statement, code):
    return [f"{code}  # {statement.comment}" if statement.comment else code]
