"""What the passes' own tests read: the Program a pass of the shared pipeline starts from, and its statements."""

import functools

from bptt.codegen.ir import the_loop, walk
from bptt.codegen.program import SHARED_PASSES, derived


@functools.cache  # each stage once per model, for every pass's test
def before(model, one):
    """The Program `one` (a pass of SHARED_PASSES) starts from: derived(model) rewritten by the passes before it."""
    at = SHARED_PASSES.index(one)
    if at == 0:
        return derived(model)
    previous = SHARED_PASSES[at - 1]
    return previous(before(model, previous))


def in_loop(a_pass):
    """The statements of a Pass's loop, guards opened; none if it has no loop."""
    loop = the_loop(a_pass.statements)
    return list(walk(loop.body)) if loop else []


def outside_loop(a_pass):
    """A Pass's statements before its loop (all of them if it has none)."""
    loop = the_loop(a_pass.statements)
    return list(a_pass.statements[: a_pass.statements.index(loop)]) if loop else list(a_pass.statements)


def after_loop(a_pass):
    """A Pass's statements after its loop."""
    loop = the_loop(a_pass.statements)
    return list(a_pass.statements[a_pass.statements.index(loop) + 1 :]) if loop else []


def named(statements):
    """{target's name: statement} of the statements that assign a sequence value (the last one for a name)."""
    return {s.target.name: s for s in statements if hasattr(getattr(s, "target", None), "name")}
