"""Printed code that knows its precedence, and the error of an expression no printer can print."""

from bptt.codegen.printing.function_code import ATOM


class PrintError(ValueError):
    """An expression the NumPy printer cannot turn into code."""


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
