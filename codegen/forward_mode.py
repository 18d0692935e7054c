"""Statements of the generated forward-mode (RTRL) gradient, from bptt.derive.rtrl.

Tangents are carried for every direction of one parameter at once: an array
(P, B, n) for P = the parameter's size. A direction M_dot = E_ij applied to a
vector v is `_directions(v, rows)`.
"""

from dataclasses import dataclass

import sympy as sp

from bptt.derive.nodes import SeqAt
from bptt.derive.rtrl import factored, forward_mode, live_states, reads_parameter
from bptt.derive.tangent import Tangent

from .numpy_printer import PrintError, RowPrinter, scalar, size_name
from .text import text


@dataclass(frozen=True)
class Block:
    """One parameter's (or initial state's) forward-mode loop."""

    key: str  # the gradient's key
    size: str  # code for the number of directions
    setup: tuple  # statements before the loop
    step: tuple  # statements at step t, updating the tangents
    outputs: str  # code for the outputs' tangents at step t
    per_sample: bool  # an initial state: one gradient per sample


class TangentPrinter(RowPrinter):
    """Row form with a leading axis of directions for tangents."""

    def __init__(self):
        super().__init__(stacked=False)

    def vector(self, expr):
        if isinstance(expr, Tangent):
            return self.tangent(expr, None)
        return super().vector(expr)

    def tangent(self, node, operand):
        """Code for node (a Tangent) times operand (a vector expression, or None)."""
        of = node.of
        if isinstance(of, SeqAt):
            return f"dot_{of.name}"
        rows, cols = of.shape
        if cols == 1:
            return f"_directions(np.ones((B, 1), dtype), {size_name(rows)})"
        if operand is None:
            raise PrintError(f"the tangent of {of.name} must multiply a vector")
        return f"_directions({self.vector(operand)}, {size_name(rows)})"

    def matmul(self, expr):
        coeff, factors = expr.as_coeff_matrices()
        at = next((i for i, f in enumerate(factors) if isinstance(f, Tangent)), None)
        if at is None:
            return super().matmul(expr)
        rest = factors[at + 1 :]
        operand = (sp.MatMul(*rest).doit(deep=False) if len(rest) > 1 else rest[0]) if rest else None
        acc = self.tangent(factors[at], operand)
        for factor in reversed(factors[:at]):
            acc = self.apply(factor, acc, expr)
        return acc if coeff == 1 else f"{scalar(coeff)} * ({acc})"


PRINT = TangentPrinter()


def _sum(terms):
    return PRINT(factored(terms))


def _updates(model, mode, live):
    """Statements updating the live states' tangents at step t, all at once."""
    targets = [s for s in live if mode.local[s] or mode.carried[s]]
    if not targets:
        return []
    codes = [_sum(mode.local[s] + mode.carried[s]) for s in targets]
    comment = "; ".join(f"{text(Tangent(s()))} = {text(factored(mode.local[s] + mode.carried[s]))}" for s in targets)
    names = ", ".join(f"dot_{s.name}" for s in targets)
    return [f"{names} = {', '.join(codes)}  # {comment}"]


def blocks(model):
    """A Block per parameter and per initial state, in the order of the gradients' keys."""
    live = live_states(model)
    out = []
    for param in model.params:
        mode = forward_mode(model, param)
        carried = reads_parameter(model, param)
        setup = (
            [f"dot_{s.name} = np.zeros(({param.name}.size, B, {size_name(s.rows)}), dtype)" for s in live]
            if carried
            else []
        )
        step = _updates(model, mode, live) if carried else []
        terms = [term for seq in mode.outputs for term in mode.outputs[seq] if carried or not _reads_state(term)]
        out.append(Block(param.name, f"{param.name}.size", tuple(setup), tuple(step), _sum(terms), False))
    for seq in model.states:
        mode = forward_mode(model, seq)
        first = f"_directions(np.ones((B, 1), dtype), {size_name(seq.rows)})"
        setup = [
            f"dot_{s.name} = np.zeros(({size_name(seq.rows)}, B, {size_name(s.rows)}), dtype)" for s in live if s != seq
        ]
        step = []
        if seq in model.forced:  # data after step 1: its tangent is nonzero at t = 1 only
            setup += [f"first = {first}", "zero = np.zeros_like(first)"]
            step = [f"dot_{seq.name} = first if t == 1 else zero  # {text(Tangent(seq(0)))} enters step 1 only"]
        else:
            setup.append(f"dot_{seq.name} = {first}")
        step += _updates(model, mode, live)
        terms = [term for s in mode.outputs for term in mode.outputs[s]]
        out.append(Block(f"{seq.name}0", size_name(seq.rows), tuple(setup), tuple(step), _sum(terms), True))
    return out


def _reads_state(term):
    return any(isinstance(d.of, SeqAt) for d in term.atoms(Tangent))
