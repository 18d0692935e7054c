"""compile=True: the torch module runs each step of its loops as one function through torch.compile.

_forward_step(t, ...) and _adjoints_step(t, ...) are printed here from the loop's statements, as plain torch
expressions written into views of step t (copy_, add_), which torch.compile fuses: on a GPU the pointwise
work of a step is one kernel, the matrix products stay library calls. A step function takes the whole
tensors (each once, never two views of one: torch.compile mishandles inputs that share memory and are
written) and the step t, and takes its views itself. The backward loop's step T, into which no step t+1
flows (or the segment after does), runs as printed in place. (torch.compile takes no `out=` into a view of
a stacked tensor, which the in-place loop writes, so the step is printed in this form of its own.)
"""

from dataclasses import dataclass

import sympy as sp

from bptt.codegen.ir import Accumulate, Assign, Flow, Guard, Steps
from bptt.codegen.printing.code import Code, PrintError
from bptt.codegen.printing.function_code import POWER, PRODUCT
from bptt.codegen.printing.statements import bound_views
from bptt.codegen.printing.terms import constant
from bptt.codegen.torch.printer import TorchPrinter
from bptt.codegen.torch.sums import WEIGHTS
from bptt.derive.nodes import Adj, t

WEIGHT = "keep_t"  # a backward step's argument: the weight of the flows from step t+1, keep[t] (a number)


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
        doc = '"""Step t of the loop, for compile=True: torch.compile fuses it (the tensors whole, each once)."""'
        return (f"def {self.name}({', '.join(self.args)}):", "    " + doc, *("    " + line for line in self.body))

    def call(self):
        """The lines at the top of the loop's body that run the step compiled, when it is."""
        test, why = ("_step is not None and t < T", "  # step T as written") if self.flows else ("_step is not None", "")
        return [f"if {test}:{why}", f"    _step({', '.join(self.args.values())})", "    continue"]


class StepPrinter(TorchPrinter):
    """The statements of a loop's step t as plain torch code: views of the whole tensors at t - 1, t and t + 1
    (a member of a stacked tensor as its rows of it), bound at the top; parameters, sizes and the stacked and
    transposed weights that `eager`, the in-place printer of the loop, makes once per call, by name."""

    def __init__(self, eager):
        super().__init__(stacked=False, arrays=eager.arrays)
        self.eager = eager
        self.args = {"t": "t"}  # name -> the caller's code
        self.views = {}  # the view's code -> its name
        self.flows = False

    def function(self, name, statements):
        body = self.lines(statements)
        args = dict(self.args, **({WEIGHT: f"{WEIGHTS}[t]"} if self.flows else {}))
        return StepFunction(name, args, tuple(bound_views(self.views) + body), self.flows)

    def lines(self, statements):
        out = []
        for statement in statements:
            out += self.statement(statement)
        return out

    def statement(self, statement):
        if isinstance(statement, Guard):  # only steps t < T run compiled: step t+1 exists
            self.flows = True
            return self.lines(statement.body)
        target, value = self(statement.target), statement.value
        if isinstance(statement, Assign):
            code = f"{target}.zero_()" if isinstance(value, sp.ZeroMatrix) else f"{target}.copy_({self(value)})"
        elif isinstance(statement, Flow):
            code = f"{target}.add_({WEIGHT} * {self.operand(value, POWER)})"
        elif isinstance(statement, Accumulate):
            code = f"{target}.add_({self(value)})"
        else:
            raise PrintError(f"no step function holds a {type(statement).__name__}")
        return [f"{code}  # {statement.comment}" if statement.comment else code]

    def sequence(self, node):
        """The view of a value at t - 1, t or t + 1: `h_prev = h[t - 1]`, `i_t = _i_f_o_g[t][..., :n_h]`."""
        seq = node.of if isinstance(node, Adj) else node
        array = self.array(node)
        shift = sp.simplify(seq.time - t)
        suffix = {0: "t", -1: "prev", 1: "next"}.get(shift)
        if suffix is None or array.steps in (Steps.ONE, Steps.ONES):
            raise PrintError(f"a step function reads {array.name} at {seq.time}, not as a step of a tensor")
        base, rows = self.eager.groups.get(array.name, (array.name, None))
        index = sp.expand(seq.time - (1 if array.steps is Steps.FROM_ONE else 0))
        code = f"{base}[{index}]" + ("" if rows is None else f"[..., {self.span(*rows)}]")
        self.args[base] = base
        if code not in self.views:
            name = f"{array.name}_{suffix}"
            while name in self.eager.taken or name in self.arrays or name in self.args or name in self.views.values():
                name += "_"
            self.views[code] = name
        return Code(self.views[code])

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


class StepLoops:
    """A mixin of the in-place printer (torch/statements.py): each step of a loop runs its step function
    through torch.compile when compile=True (for t < T in the backward loop), else as printed in place."""

    def _print_Loop(self, loop):
        head, body = self.loop_parts(loop)
        name = "_adjoints_step" if loop.backward else "_forward_step"
        if any(function.name == name for function in self.step_functions):
            raise PrintError(f"a second {'backward' if loop.backward else 'forward'} loop: {name} is taken")
        steps = StepPrinter(self)
        function = steps.function(name, loop.body)
        for names, more in zip(vars(self.used).values(), vars(steps.used).values(), strict=True):
            names |= more  # what the step reads, bound where the loop is
        self.step_functions.append(function)
        choose = f"_step = {self.helper('_compiled')}({name}) if compile else None  # compile=True: through torch.compile"
        return [choose, head] + ["    " + line for line in function.call() + body]
