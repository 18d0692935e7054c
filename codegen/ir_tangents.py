"""The IR's nodes for forward mode (RTRL): passes/forward_mode.py makes them, into Program.forward_mode (ir.py's
tree draws them); printing/tangents.py, torch/rtrl.py and jax/forward_mode.py print them."""

from dataclasses import dataclass

import sympy as sp

# Forward mode (RTRL): the tangents along every direction of every gradient at once, in one loop over time.
# The directions of the gradients (a parameter's entries, an initial state's rows) are stacked on a first axis:
# a tangent array is (P, B, rows), and rows along_U of it are the tangents along the entries of U. In an
# expression Tangent(h_t) is that array at step t, Tangent(W) x_t every direction of W applied to x_t (its
# local term: added into W's rows only, AddAlong). A step assigns its tangents in order, each reading those
# assigned before it (`dot_c` in `dot_h`). Their arrays' names: array_names.py.


@dataclass(frozen=True)
class Units:
    """units_<rows> = every direction of a vector of `rows` entries, (rows, B, rows): bound once per pass."""

    rows: object


@dataclass(frozen=True)
class Direction:
    """The directions of one gradient: the entries of a parameter, or the rows of an initial state (whose
    gradient is per sample)."""

    key: str  # the gradient's key: `W`, `h0`
    wrt: object  # the parameter, or the state Seq

    @property
    def per_sample(self):
        return not isinstance(self.wrt, sp.MatrixSymbol)


@dataclass(frozen=True)
class TangentArray:
    """A state's tangents before step 1: zero, and along its own initial value (`own`, when that is a
    carried direction) every direction of it."""

    state: object  # the state Seq
    own: object = None  # the Direction of the state's initial value, or None


@dataclass(frozen=True)
class AddAlong:
    """target[along] += value: a local term of a tangent (linear in the tangent of `along`'s parameter),
    added into the rows of that parameter's directions only."""

    target: object  # Tangent(X_t)
    along: Direction
    value: object
    comment: str = ""


@dataclass(frozen=True)
class Previous:
    """dot_S_prev = dot_S at the top of step t: the step reads S's tangent at t - 1 after assigning the one
    at t; in the loop every tangent of S at t - 1 is read from dot_S_prev."""

    state: object
    comment: str


@dataclass(frozen=True)
class Contract:
    """A share of step t of every gradient, per sample: an output's tangent o_dot_t (P, B, q) against dL/do_t
    (B, q), into the rows of `along` (a local term), or of every carried direction (along None)."""

    tangent: object  # o_dot_t, or one of its terms, linear in Tangent nodes
    adjoint: object  # Adj(o_t)
    along: object = None  # a Direction, or None
    comment: str = ""  # the term contracted
    heading: str = ""  # a line above it: the output's tangent, for the first of its terms


@dataclass(frozen=True)
class TangentLoop:
    """Forward mode in one loop over t = 1..T: the tangents along every carried direction, stacked, and each
    step's share of every gradient contracted into `total` (B, rows of every direction), per sample."""

    directions: tuple  # Direction per gradient that is not zero, in the rows of total: the carried ones first
    carried: int  # how many of them the tangents carry (the others are read by the outputs' local terms only)
    arrays: tuple  # TangentArray per state whose tangent at t - 1 the step reads
    body: tuple  # the statements of step t: Previous, then in the step's order Assign(Tangent(X_t), value) and
    #              AddAlong per named tangent (an Assign of zero at the end for a state no step assigns), Contract
    comment: str


@dataclass(frozen=True)
class Gradient:
    """grads[key] from the loop's total: a parameter's rows summed over the batch, an initial state's per sample."""

    direction: Direction
    comment: str = ""


@dataclass(frozen=True)
class ZeroGradient:
    """A gradient by forward mode that is zero: no output's tangent depends on `wrt` (a gate that
    nothing reads, say), so there is nothing to carry through time."""

    key: str
    wrt: object
    comment: str

    per_sample = Direction.per_sample
