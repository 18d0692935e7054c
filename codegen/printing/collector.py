"""Python's cyclic garbage collector paused while codegen builds a module.

Generating a module makes millions of short-lived objects (SymPy's expressions, the printers' strings, the syntax
trees that check the layout); each of the collections they set off walks every object of the process, and in a
process full of SymPy's (and torch's or JAX's) those walks took longer than the work. Nearly all of codegen's
garbage is freed by its reference count; what is left of cycles is collected when the pause ends.
"""

import contextlib
import gc


@contextlib.contextmanager
def paused():
    """Run the block with the collector disabled; as it was after (also when the block raises)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
