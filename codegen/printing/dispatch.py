"""SymPy's Printer with its dispatch remembered: the code printers' base (products.ProductPrinting).

Printer._print finds the method for a node by walking the MRO of the node's class, building each class's
`_print_<name>` and asking the printer for it, at every node it prints: 4% of generating a module. Which
method it finds is a function of the printer's class and the node's class, so it is found once per pair.
"""

import functools

from sympy.core.function import AppliedUndef, Function, UndefinedFunction
from sympy.printing.printer import Printer


class Dispatching(Printer):
    """A Printer whose _print calls the method Printer._print would, found once per printer and node class."""

    def _print(self, expr, **kwargs):
        name = None if self.printmethod else _method(type(self), type(expr))
        if name is None:  # SymPy's own dispatch: a node printing itself, a function, or the emptyPrinter
            return super()._print(expr, **kwargs)
        self._print_level += 1
        try:
            return getattr(self, name)(expr, **kwargs)
        finally:
            self._print_level -= 1


@functools.cache
def _method(printer, kind):
    """The name of the method Printer._print calls for a node of class `kind`: that of the first class of its MRO
    the printer has a method for; None if none has one, or if SymPy's rules for functions reorder the MRO."""
    classes = kind.__mro__
    if AppliedUndef in classes or UndefinedFunction in classes or Function in classes:
        return None
    names = ("_print_" + cls.__name__ for cls in classes)
    return next((name for name in names if getattr(printer, name, None) is not None), None)
