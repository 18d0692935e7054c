"""The IR's nodes for BPTT in bounded memory (passes/checkpoint.py makes them; ir.py's tree draws them).

The schedule cuts the steps into segments at run time, and step T of a segment reads what step T+1 would
have given it from the segment after: a Boundary says what it reads there (a Crossing each), and the
Program's Checkpoints what the schedule weighs, in rows per sample."""

from dataclasses import dataclass

from bptt.codegen.ir import Guard


@dataclass(frozen=True)
class Boundary(Guard):
    """A Guard (statements reading step t+1, for t < T) with `following`: the same statements for t = T of a
    segment, reading the values at step 1 of the segment after it (`crossings`: their names) in place of t+1's."""

    following: tuple = ()
    crossings: tuple = ()


@dataclass(frozen=True)
class Crossing:
    """A value step T of a segment reads from the segment after it."""

    name: str  # its name in code: _next_f, _d_next_a
    node: object  # the value step t reads at t+1: SeqAt(f, t+1), Adj(a_{t+1})
    read: object  # what the Boundary reads in its place: SeqAt(_next_f, 0) (arrays of one step, index 0)
    first: object  # the value at step 1 of the segment after: SeqAt(f, 1), Adj(a_1)


@dataclass(frozen=True)
class Checkpoints:
    """What the schedule weighs, in rows per sample (times B and the dtype's bytes at run time), and what
    crosses a boundary between segments."""

    kept: tuple  # the state Seqs a kept state holds (a teacher-forced one too: the data it is at that step)
    reads: tuple  # what one backward step reads: the cached sequences' names
    state_rows: object  # a kept state
    forward_rows: object  # one step of the forward pass's arrays
    backward_rows: object  # one step of the backward pass's arrays
    aged_rows: object  # the adjoints that carry an age axis in a window (times k + 1 ages)
    crossings: tuple  # Crossing per value read across a boundary, full pass
    window_crossings: tuple  # likewise, the window pass
