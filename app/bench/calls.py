"""Framework calls per step: how many library calls one step of a module's forward and backward recursion makes.

Counted in the source a backend prints for a model (its syntax tree), not timed: every call of the
framework (`np.tanh(...)`, `torch.mul(...)`, a tensor's `add_`, `x.at[...].set(...)`), every arithmetic
operator on arrays (`a * b`, `-a`, `a += b`, `a[...] = b`), and a helper of the module (`_sigmoid`) as the
calls of its body. Index arithmetic (`h[t - 1]`) and taking views (`h[t]`) are not calls. The step counted
is a typical one of full BPTT: not the last (`t < T` holds) and untruncated (`keep is None`, `ages is None`),
as the module runs by default (torch's without compile=True: `_step is None`).

The loops: `for t in range(...)` in `_forward` and `_adjoints` (NumPy, torch), the scans' `_step` in
`_forward` and `_gradients_and_following` (JAX, whose jit fuses the traced operations: there the count
is of operations traced per step, not of calls made).
"""

import ast
import pathlib
from dataclasses import dataclass

LOOPS = {  # the functions that hold the loops, the first a module has
    "forward": ("_forward",),
    "backward": ("_adjoints", "_gradients_and_following", "_gradients"),
}
TRUTH = {  # the step counted: a test of an `if` in a loop or a helper, and its value there
    "t < T": True,
    "keep is None": True,
    "keep is not None": False,
    "ages is None": True,
    "ages is not None": False,
    "_step is not None": False,  # the torch module's step through torch.compile (compile=True): not the default
    "_step is not None and t < T": False,
}


@dataclass(frozen=True)
class StepCalls:
    """Calls per step of the forward and of the backward recursion; None where the module has no loop."""

    forward: int | None
    backward: int | None

    def line(self, backend=None):
        """`calls per step: forward 10, backward 9 (...)` (a pass without a loop: `no loop`)."""
        from bptt.codegen.backends import of

        adapter = of(backend)
        forward, backward = ("no loop" if n is None else str(n) for n in (self.forward, self.backward))
        if adapter.traced:
            return f"operations traced per step: forward {forward}, backward {backward} (jit fuses them)"
        return f"calls per step: forward {forward}, backward {backward} ({adapter.name} calls in one step of each loop)"


def step_calls(source):
    """StepCalls of a generated module's source."""
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    counts = {}
    for kind, names in LOOPS.items():
        function = next((functions[name] for name in names if name in functions), None)
        loop = None if function is None else _loop(function)
        if loop is None:
            counts[kind] = None
            continue
        nested = {node.name: node for node in ast.walk(function) if isinstance(node, ast.FunctionDef)}
        counts[kind] = _Counter({**functions, **nested}).statements(loop)
    return StepCalls(**counts)


def _loop(function):
    """The body of the function's recursion: its `for t in range(...)`, or its nested `_step`; None if neither."""
    for node in ast.walk(function):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id == "t":
            return node.body
        if isinstance(node, ast.FunctionDef) and node is not function and node.name == "_step":
            return node.body
    return None


class _Counter:
    """Counts the calls of statements and expressions; `helpers`: the functions a call may name."""

    def __init__(self, helpers):
        self.helpers = helpers
        self.opened = set()  # the helpers being counted (a recursive helper would never end)

    def statements(self, body):
        return sum(self.statement(node) for node in body)

    def statement(self, node):
        if isinstance(node, ast.If):
            return self.statements(node.body if _decided(node.test) else node.orelse)
        if isinstance(node, (ast.With, ast.For)):
            return self.statements(node.body)
        if isinstance(node, (ast.FunctionDef, ast.Pass)):
            return 0
        if isinstance(node, ast.AugAssign):
            return 1 + self.expression(node.value)
        if isinstance(node, ast.Assign):
            copies = sum(1 for target in node.targets if isinstance(target, ast.Subscript))
            return copies + self.expression(node.value)
        if isinstance(node, (ast.Expr, ast.Return)):
            return self.expression(node.value) if node.value is not None else 0
        raise ValueError(f"cannot count the calls of a {type(node).__name__} statement at line {node.lineno}")

    def expression(self, node):
        if isinstance(node, ast.IfExp):
            return self.expression(node.body if _decided(node.test) else node.orelse)
        if isinstance(node, ast.Subscript):
            return self.expression(node.value)  # a view; its index is Python arithmetic
        if isinstance(node, ast.Call):
            return self.call(node) + sum(self.expression(arg) for arg in node.args + [k.value for k in node.keywords])
        arithmetic = isinstance(node, ast.BinOp) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub))
        return int(arithmetic) + sum(self.expression(child) for child in ast.iter_child_nodes(node))

    def call(self, node):
        """The calls a call makes itself: one of the framework's, a helper's body, or none (a builtin)."""
        if isinstance(node.func, ast.Attribute):
            return 1 + self.expression(node.func.value)
        name = getattr(node.func, "id", None)
        if name not in self.helpers or name in self.opened:
            return 0
        self.opened.add(name)
        count = self.statements(self.helpers[name].body)
        self.opened.discard(name)
        return count


def _decided(test):
    """The value of an `if`'s test at the step counted (TRUTH), or ValueError naming the test."""
    code = ast.unparse(test)
    if code not in TRUTH:
        raise ValueError(f"cannot decide `{code}` for the step counted (known: {', '.join(TRUTH)})")
    return TRUTH[code]


def model_calls(model, backend=None):
    """StepCalls of the module the backend prints for the model."""
    from bptt.codegen.backends import of

    return step_calls(of(backend).module_source(model))


def module_calls(model, module, backend=None):
    """StepCalls of the module bench measures: counted in its file (a zoo module, as codegen wrote it) without
    printing it again; a module run from printed source (a user's model: no file) is printed again."""
    path = getattr(module, "__file__", None)
    if path is None:
        return model_calls(model, backend)
    return step_calls(pathlib.Path(path).read_text(encoding="utf-8"))
