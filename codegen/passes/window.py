"""The window pass (window-truncated BPTT): the adjoint statements kept plain, each adjoint that flows back
through time carrying an age axis (printing/window.py prints them so)."""

from dataclasses import replace

from bptt.codegen.ir import Flow, Pass, walk
from bptt.derive.atoms import atoms
from bptt.derive.nodes import Adj


def plain_window(program):
    """The Program whose window pass is its adjoint statements and dL/dS_0 as they stand: the slopes named,
    before the passes that make the full pass fast (checkpointed adds the window's boundaries)."""
    return replace(program, window=Pass(program.adjoints.statements), window_initial=program.initial)


def aged_adjoints(program):
    """The Program whose `recurrent` holds every adjoint that carries an age axis in a window: the recurrent
    ones, and those a flow from step t+1 reads (a local adjoint there enters at age 0, not at every age of
    the flow it joins)."""
    read = {a.of.name for s in walk(program.window.statements) if isinstance(s, Flow) for a in atoms(s.value, Adj)}
    return replace(program, recurrent=tuple(sorted(set(program.recurrent) | read)))
