"""SymPy's canonical form of a matrix product and a matrix sum, remembered.

Every matrix operator (`W * h`, `a + b`) is SymPy's `MatMul(a, b).doit()`, which puts the whole of both operands
in canonical form again, down to their leaves; so a derivation asks for the same subtrees thousands of times (half
of `bptt latex`'s derivation). MatMul.doit and MatAdd.doit are pure functions of the expression and the hints, so
their results are remembered. While a model's function runs (written.built, inside `fresh`), each is computed as
SymPy computes it: the operators it calls then note the order of sums as written (written.py), which a remembered
result would skip.
"""

import contextlib
import contextvars
import functools

from sympy.matrices.expressions.matadd import MatAdd
from sympy.matrices.expressions.matmul import MatMul

_FRESH = contextvars.ContextVar("fresh", default=False)  # True while a model's function runs (written.built)


@contextlib.contextmanager
def fresh():
    """Inside, every MatMul.doit and MatAdd.doit runs as SymPy's own."""
    token = _FRESH.set(True)
    try:
        yield
    finally:
        _FRESH.reset(token)


def _remembered(doit):
    @functools.lru_cache(maxsize=16384)
    def cached(expr, hints):
        return doit(expr, **dict(hints))

    @functools.wraps(doit)
    def remembered(self, **hints):
        return doit(self, **hints) if _FRESH.get() else cached(self, tuple(sorted(hints.items())))

    remembered.cache_clear = cached.cache_clear
    return remembered


for _kind in (MatMul, MatAdd):
    _kind.doit = _remembered(_kind.doit)
