"""Printed code that knows its precedence, and the error of an expression no printer can print."""

from bptt.codegen.printing.function_code import ATOM
from bptt.derive.refusal import Refusal
from bptt.derive.text import described, notation


class PrintError(Refusal):
    """An expression a backend's printer cannot turn into code (Backend.module_source names the backend)."""


def no_factor_code(factor):
    """The refusal of a matrix the generated code cannot multiply a vector by (only a parameter, its transpose,
    or a diagonal)."""
    return PrintError(f"the generated code cannot multiply by {described(factor)} yet", factor)


def unspecified_loss(loss):
    """The refusal of a loss with no code (GenericLoss: l(o_t, y_t) left unspecified)."""
    return PrintError(
        f"the loss {notation(loss)} is not specified, so it has no code; give the model a concrete code_loss"
    )


class Code(str):
    """Printed code that knows how tightly it binds (ATOM > POWER > UNARY > PRODUCT > SUM)."""

    def __new__(cls, text, level=ATOM):
        code = str.__new__(cls, text)
        code.level = level
        return code


def tuple_items(codes):
    """The items of a tuple's code: `a, b`, and `a,` for one item (a tuple still, not a parenthesised a)."""
    codes = [str(code) for code in codes]
    return ", ".join(codes) + ("," if len(codes) == 1 else "")
