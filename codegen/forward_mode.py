"""The generated forward-mode (RTRL) gradient, from bptt.derive.rtrl: typed blocks, then NumPy lines.

Tangents are carried for every direction of one parameter at once: an array
(P, B, n) for P = the parameter's size. A direction M_dot = E_ij applied to a
vector v is `_directions(v, rows)`.
"""

import functools
from dataclasses import dataclass

import sympy as sp

from bptt.derive.nodes import SeqAt
from bptt.derive.rtrl import factored, forward_mode, live_states, reads_parameter
from bptt.derive.tangent import Tangent

from .numpy_bindings import Printed
from .numpy_printer import PRODUCT, Code, PrintError, RowPrinter
from .text import text


@dataclass(frozen=True)
class Block:
    """One parameter's (or initial state's) forward-mode loop."""

    key: str  # the gradient's key
    wrt: object  # the parameter (MatrixSymbol), or the state Seq of an initial state
    zero: tuple  # live state Seqs whose tangents start at zero
    updates: tuple  # ((state Seq, tangent at step t), ...), updated together
    outputs: object  # the outputs' tangent at step t
    forced: bool = False  # an initial state that is data after step 1: its tangent enters step 1 only

    @property
    def per_sample(self):
        return not isinstance(self.wrt, sp.MatrixSymbol)


@functools.cache  # every backend prints the same blocks of a model
def blocks(model):
    """A Block per parameter and per initial state, in the order of the gradients' keys."""
    live = live_states(model)
    out = []
    for param in model.params:
        mode = forward_mode(model, param)
        carried = reads_parameter(model, param)
        terms = [term for seq in mode.outputs for term in mode.outputs[seq] if carried or not _reads_state(term)]
        updates = _updates(mode, live) if carried else ()
        out.append(Block(param.name, param, tuple(live) if carried else (), updates, factored(terms)))
    for seq in model.states:
        mode = forward_mode(model, seq)
        terms = [term for s in mode.outputs for term in mode.outputs[s]]
        zero = tuple(s for s in live if s != seq)
        out.append(Block(f"{seq.name}0", seq, zero, _updates(mode, live), factored(terms), seq in model.forced))
    return tuple(out)


def _updates(mode, live):
    return tuple((s, factored(mode.local[s] + mode.carried[s])) for s in live if mode.local[s] or mode.carried[s])


def _reads_state(term):
    return any(isinstance(d.of, SeqAt) for d in term.atoms(Tangent))


class TangentPrinter(RowPrinter):
    """Row form with a leading axis of directions for tangents."""

    def _print_Tangent(self, expr):
        return self.tangent(expr, None)

    def _print_MatrixSlice(self, expr):
        if isinstance(expr.parent, Tangent):
            return self.tangent(expr, None)
        return super()._print_MatrixSlice(expr)

    def tangent(self, node, operand):
        """Code for node (a Tangent, or a block of one) times operand (a vector expression, or None)."""
        if isinstance(node, sp.MatrixSlice):  # the block's rows of every direction of the whole parameter
            columns = node.parent.shape[1]
            if columns != 1 and not (node.colslice[0] == 0 and sp.simplify(node.colslice[1] - columns) == 0):
                raise PrintError(f"forward mode takes blocks of whole columns only, not {node}")
            rows = self.span(*node.rowslice[:2], size=node.parent.shape[0])
            return Code(f"{self.tangent(node.parent, operand)}[..., {rows}]")
        of = node.of
        if isinstance(of, SeqAt):
            return Code(f"dot_{of.name}")
        rows, cols = of.shape
        if cols == 1:
            return self.directions(rows)
        if operand is None:
            raise PrintError(f"the tangent of {of.name} must multiply a vector")
        return Code(f"{self.helper('_directions')}({self(operand)}, {self(rows)})")

    def directions(self, rows):
        return Code(f"{self.helper('_directions')}(np.ones((B, 1), dtype), {self(rows)})")

    def _print_MatMul(self, expr):
        coeff, factors = expr.as_coeff_matrices()
        at = next((i for i, f in enumerate(factors) if isinstance(_tangent_of(f), Tangent)), None)
        if at is None:
            return super()._print_MatMul(expr)
        rest = factors[at + 1 :]
        operand = (sp.MatMul(*rest).doit(deep=False) if len(rest) > 1 else rest[0]) if rest else None
        acc = self.tangent(factors[at], operand)
        for factor in reversed(factors[:at]):
            acc = self.apply(factor, acc, expr)
        return acc if coeff == 1 else Code(f"{self.operand(coeff, PRODUCT)} * ({acc})", PRODUCT)


def _tangent_of(factor):
    """The Tangent a factor is, or a block of."""
    return factor.parent if isinstance(factor, sp.MatrixSlice) else factor


def lines(model, output="d_s"):
    """The body of forward_mode_grads after its checks: every block's loop, as NumPy lines."""
    printer = TangentPrinter(stacked=False)
    out = []
    for block in blocks(model):
        out += block_lines(printer, block, output)
    return Printed.of(out, printer.used)


@dataclass(frozen=True)
class Arrays:
    """How a backend's code makes the arrays of the forward-mode loops."""

    zeros: str  # a format string of {shape}
    zeros_like: str
    einsum: str
    size: str  # what follows an array for its number of entries


NUMPY_ARRAYS = Arrays("np.zeros({shape}, dtype)", "np.zeros_like", "np.einsum", ".size")


def block_lines(printer, block, output, arrays=NUMPY_ARRAYS):
    """One block's loop: the tangents along every entry of a parameter (or initial state), summed into its gradient."""
    size = printer(block.wrt.rows) if block.per_sample else f"{printer(block.wrt)}{arrays.size}"
    out = [
        f"# {block.key}: tangents along every entry of {block.key}" + (", for each sample" if block.per_sample else "")
    ]
    out += [f"dot_{s.name} = {arrays.zeros.format(shape=f'({size}, B, {printer(s.rows)})')}" for s in block.zero]
    step = []
    if block.per_sample and block.forced:
        out += [f"first = {printer.directions(block.wrt.rows)}", f"zero = {arrays.zeros_like}(first)"]
        step.append(
            f"dot_{block.wrt.name} = first if t == 1 else zero  # {text(Tangent(block.wrt(0)))} enters step 1 only"
        )
    elif block.per_sample:
        out.append(f"dot_{block.wrt.name} = {printer.directions(block.wrt.rows)}")
    if block.updates:
        names = ", ".join(f"dot_{s.name}" for s, _ in block.updates)
        codes = ", ".join(str(printer(value)) for _, value in block.updates)
        comment = "; ".join(f"{text(Tangent(s()))} = {text(value)}" for s, value in block.updates)
        step.append(f"{names} = {codes}  # {comment}")
    out.append(f"total = {arrays.zeros.format(shape=f'(B, {size})' if block.per_sample else size)}")
    out.append("for t in range(1, T + 1):")
    out += [f"    {line}" for line in step]
    contract = "bp" if block.per_sample else "p"
    out.append(f'    total += {arrays.einsum}("pbk,bk->{contract}", {printer(block.outputs)}, {output}[t - 1])')
    out.append(f'grads["{block.key}"] = total' + ("" if block.per_sample else f".reshape({block.key}.shape)"))
    return out
