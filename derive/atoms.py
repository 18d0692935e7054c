"""The nodes of given kinds an expression holds (SymPy's Basic.atoms), remembered.

The passes and printers ask it of the same statement values again and again (which sequences a value reads at
which step, which adjoints, which tangents), and each asking walked the whole tree: 7% of generating a
module. A SymPy expression is immutable, so the answer is a function of the expression and the kinds; it is
remembered as a frozenset, which no caller can change. Its order of iteration is not Basic.atoms' set's: callers
sort it, or use it as a set.
"""

import functools

from sympy import Atom, Basic
from sympy.utilities.iterables import iterable


@functools.lru_cache(maxsize=1 << 15)
def atoms(expr, *kinds):
    """expr.atoms(*kinds), a frozenset: as there, no kinds means Atom, and an instance given stands for its class."""
    kinds = tuple(kind if isinstance(kind, type) else type(kind) for kind in kinds) or (Atom,)
    return frozenset(_walked(expr, kinds))


def _walked(expr, kinds):
    """The nodes of those kinds that Basic.atoms finds (every node of its preorder traversal), found by a loop:
    a third of the time of SymPy's traversal by generators."""
    found, todo = set(), [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, kinds):
            found.add(node)
        if isinstance(node, Basic):
            todo.extend(node.args)
        elif iterable(node):
            todo.extend(node)
    return found
