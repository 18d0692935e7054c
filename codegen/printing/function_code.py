"""A backend's code for the elementwise functions, built as a tree and printed with the parentheses
Python's precedence needs (as SymPy's printers map known functions, one table per backend).

A table entry is a function of the array library and the argument: `lambda xp, x: x / (1 + xp.abs(x))`.
Called with `Library("np")` and the argument as a Term, it returns the code as a Term: `xp.abs` is
the library's function, `x / ...` an operator whose operands are parenthesised as they bind. The
same entry on `Library("jnp")` is JAX's code. A Term that is one call of a function taking `out=`
becomes an in-place call (`np.tanh(a, out=a)`) by adding that keyword to the call, not to its text.
"""

from dataclasses import dataclass

COMPARE, SUM, PRODUCT, UNARY, POWER, ATOM = 0, 1, 2, 3, 4, 5  # how tightly printed code binds


def _operator(op, level, reflected=False):
    """The method of a binary operator: Term op other, or other op Term when reflected (2 * x)."""
    if reflected:
        return lambda self, other: _binary(other, op, self, level)
    return lambda self, other: _binary(self, op, other, level)


class Term:
    """Code with how tightly it binds; a call keeps its callee and arguments. `function`: (module, name)
    of a library function (`("np", "tanh")`), or (None, name) of a helper the module carries."""

    __slots__ = ("text", "level", "call", "function", "helpers")

    def __init__(self, text, level=ATOM, call=None, function=None, helpers=frozenset()):
        self.text, self.level, self.call, self.function, self.helpers = text, level, call, function, helpers

    def __str__(self):
        return self.text

    def __call__(self, *args, **keywords):
        listed = [_text(arg) for arg in args] + [f"{key}={_text(value)}" for key, value in keywords.items()]
        helpers = _helpers(self, *args, *keywords.values())
        return Term(f"{self.text}({', '.join(listed)})", ATOM, (self, args, keywords), helpers=helpers)

    def __getattr__(self, name):  # a method or attribute of the value: `x.dtype`, `(x > 0).to`
        if name.startswith("_"):
            raise AttributeError(name)
        return Term(f"{_operand(self, ATOM)}.{name}", ATOM, helpers=self.helpers)

    __add__, __radd__ = _operator("+", SUM), _operator("+", SUM, reflected=True)
    __sub__, __rsub__ = _operator("-", SUM), _operator("-", SUM, reflected=True)
    __mul__, __rmul__ = _operator("*", PRODUCT), _operator("*", PRODUCT, reflected=True)
    __truediv__, __rtruediv__ = _operator("/", PRODUCT), _operator("/", PRODUCT, reflected=True)
    __gt__ = _operator(">", COMPARE)

    def __pow__(self, other):  # the base binds tighter than **, the exponent may be a unary minus
        return Term(f"{_operand(self, ATOM)} ** {_operand(other, UNARY)}", POWER, helpers=_helpers(self, other))

    def __neg__(self):
        return Term(f"-{_operand(self, UNARY)}", UNARY, helpers=self.helpers)


def _binary(left, op, right, level):
    """left op right, left-associative: the right operand is parenthesised at the operator's own level, and
    so is the left of a comparison (Python chains `a > b > c`)."""
    text = f"{_operand(left, level + (level == COMPARE))} {op} {_operand(right, level + 1)}"
    return Term(text, level, helpers=_helpers(left, right))


def _text(value):
    """A Term's code, or a number's: an integer's digits, any other number as repr prints its float."""
    if isinstance(value, Term):
        return value.text
    if isinstance(value, bool):  # keepdims=True
        return str(value)
    if isinstance(value, int) or getattr(value, "is_Integer", False):
        return str(int(value))
    return repr(float(value))


def _operand(value, level):
    """value's code, parenthesised unless it binds at least as tightly as `level`."""
    text = _text(value)
    binds = value.level if isinstance(value, Term) else (ATOM if float(value) >= 0 else UNARY)
    return text if binds >= level else f"({text})"


def _helpers(*values):
    return frozenset().union(*(value.helpers for value in values if isinstance(value, Term)))


def helper(name):
    """A helper function the generated module carries (`_sigmoid`)."""
    return Term(name, function=(None, name), helpers=frozenset((name,)))


def function(module, name):
    """A library function: `np.tanh`, `jax.nn.sigmoid`."""
    return Term(f"{module}.{name}", function=(module, name))


class Library:
    """An array library as table entries see it: `xp.tanh` is `np.tanh` for Library("np"); `renamed`
    gives other code for some names (NumPy's sigmoid is the helper _sigmoid, JAX's jax.nn.sigmoid)."""

    def __init__(self, module, **renamed):
        self.module, self.renamed = module, renamed

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.renamed.get(name) or function(self.module, name)


@dataclass(frozen=True)
class FunctionTable:
    """One backend's code for the elementwise functions: entries by the registry entry's `kind` (its name,
    or a family's such as leaky_relu, whose `constants` the entry takes as keywords)."""

    name: str  # how errors name the table: NUMPY_FUNCTIONS
    library: Library
    entries: dict  # kind -> entry(library, x, **constants) -> Term

    def __contains__(self, kind):
        return kind in self.entries

    def register(self, kind, entry):
        """Add (or replace) the code of the function (or family) `kind`: entry(xp, x, **constants) -> Term."""
        self.entries[kind] = entry

    def code(self, registered, x):
        """The code of a registry entry's function of the argument Term x."""
        return self.entries[registered.kind](self.library, x, **dict(registered.constants))


def in_place(term, x, out, takes_out):
    """The call `term` writing into `out` (`np.tanh(x)` -> `np.tanh(x, out=out)`), or None unless it is one
    call of a function that takes out= (`takes_out((module, name))`), on x first and numbers after."""
    if term.call is None:
        return None
    callee, args, keywords = term.call
    plain = not keywords and args and args[0] is x and not any(isinstance(arg, Term) for arg in args[1:])
    if not (plain and callee.function is not None and takes_out(callee.function)):
        return None
    return callee(*args, out=Term(out)).text
