"""The forward values a scan stacks: a pass of the backends that print the forward loop as a scan (JAX).

A scan's outputs hold the steps 1..T of what it computes. Only a state needs step 0 too (its initial value, read
at t-1 by step 1, and where a segment of steps starts), so every other array of the forward pass holds steps
1..T (Steps.FROM_ONE): the scan's own outputs, with no row of zeros built around them.
"""

from dataclasses import replace

from bptt.codegen.ir import Steps, walk
from bptt.derive.atoms import atoms
from bptt.derive.nodes import SeqAt, t


def scanned_values(program):
    """The Program with the forward arrays that hold no state, and that no statement reads at t-1, of steps 1..T."""
    stepped = {seq.name for seq in program.model.states} | _read_before(program)
    arrays = tuple(
        array
        if array.steps is not Steps.FROM_ZERO or stepped & {array.name, *(name for name, _ in array.members)}
        else replace(array, steps=Steps.FROM_ONE)
        for array in program.forward.arrays
    )
    return replace(program, forward=replace(program.forward, arrays=arrays))


def _read_before(program):
    """The names of the values any pass reads at a step before the one it computes (t-1), or at step 0."""
    passes = (program.forward, program.adjoints, program.window, program.gradients, program.forward_mode)
    values = [s.value for a_pass in passes for s in walk(a_pass.statements) if hasattr(s, "value")]
    values += [item.value for item in program.initial + program.window_initial]
    return {seq.name for value in values for seq in atoms(value, SeqAt) if (seq.time - t).is_negative or seq.time == 0}
