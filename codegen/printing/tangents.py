"""Print the forward-mode statements (ir_tangents.Units, TangentLoop and its parts) as one NumPy loop over time;
torch/rtrl.py and jax/forward_mode.py print the same statements with their own arrays (and JAX as a scan).

A tangent array has a first axis of directions, (P, B, n): the directions of every carried gradient, each
gradient's rows a slice `along_W`. The tangent of a matrix parameter applied to a vector v, every direction
E_ij at once, is `_directions(v, rows)`; that of a vector parameter is every direction of a vector, an array
bound once (`units_n_h`). Every step adds its share of each gradient into `total`, (B, every direction).
"""

import sympy as sp

from bptt.codegen.array_names import along_name, previous_tangent_array, tangent_array, units_name
from bptt.codegen.ir_tangents import Previous
from bptt.codegen.printing.printer import ATOM, PRODUCT, Code, PrintError, RowPrinter
from bptt.derive.nodes import SeqAt, simplified, time_shift
from bptt.derive.tangent import Tangent
from bptt.derive.text import notation

DIRECTIONS = "directions"  # the number of carried directions: the first axis of every tangent array


class TangentPrinter(RowPrinter):
    """Row form with a first axis of directions for tangents; the forward-mode loop as a for-loop."""

    previous = frozenset()  # the states whose tangents at t - 1 the loop reads from dot_S_prev

    # the arrays a backend makes (torch/rtrl.py and jax/forward_mode.py override them)

    def zeros(self, shape):
        return f"np.zeros({shape}, dtype)"

    def ones(self, shape):
        return f"np.ones({shape}, dtype)"

    def einsum(self, spec, *operands):
        return f'np.einsum("{spec}", {", ".join(operands)})'

    def entries(self, code):
        """The number of entries of an array."""
        return f"{code}.size"

    def fresh(self, code):
        """A copy of an array, sharing no memory with it."""
        return f"{code}.copy()"

    def pad_columns(self, code, before, after):
        """A (B, n) array with `before` zero columns left of it and `after` right."""
        return f"np.pad({code}, ((0, 0), ({before}, {after})))"

    def add_into(self, target, rows, value):
        """target[rows] += value, as a line."""
        return f"{target}[{rows}] += {value}"

    def set_into(self, target, rows, value):
        """target[rows] = value, as a line."""
        return f"{target}[{rows}] = {value}"

    # statements

    def lines(self, statements):
        return [line for statement in statements for line in self._print(statement)]

    def _print_Units(self, units):
        every = f"{self.helper('_directions')}({self.ones('(B, 1)')}, {self(units.rows)})"
        return [f"{units_name(units.rows)} = {every}  # every direction of a vector of {units.rows} entries"]

    def size(self, direction):
        """The number of directions of a gradient: an initial state's rows, a parameter's entries."""
        return self(direction.wrt.rows) if direction.per_sample else self.entries(self(direction.wrt))

    def head(self, loop):
        """The lines before the loop: the rows of each gradient's directions, the carried count, the start of
        every tangent carried, and the total."""
        out = [f"# {loop.comment}"]
        stop = "0"
        for direction in loop.directions:
            name = along_name(direction.key)
            out.append(f"{name} = slice({stop}, {'' if stop == '0' else stop + ' + '}{self.size(direction)})")
            stop = f"{name}.stop"
        if loop.carried:
            last = along_name(loop.directions[loop.carried - 1].key)
            others = " (the others only the outputs' local terms read)" if loop.carried < len(loop.directions) else ""
            out.append(f"{DIRECTIONS} = {last}.stop  # the rows the tangents carry{others}")
        for array in loop.arrays:
            out += self.start(array)
        out.append(f"total = {self.zeros(f'(B, {stop})')}  # every gradient, per sample: its rows along it")
        return out

    def start(self, array):
        """A tangent before step 1: zero, and every direction of the initial state in its own rows."""
        name, rows = tangent_array(array.state), self(array.state.rows)
        out = [f"{name} = {self.zeros(f'({DIRECTIONS}, B, {rows})')}"]
        if array.own is not None:
            out.append(self.set_into(name, along_name(array.own.key), units_name(array.state.rows)))
        return out

    def begin(self, loop):
        """Before printing a loop's body: the states whose tangents at t - 1 it reads from dot_S_prev."""
        self.previous = {s.state.name for s in loop.body if isinstance(s, Previous)}

    def _print_TangentLoop(self, loop):
        self.begin(loop)
        out = self.head(loop)
        out.append("for t in range(1, T + 1):")
        return out + ["    " + line for line in self.lines(loop.body)]

    def _print_Gradient(self, gradient):
        direction = gradient.direction
        rows = f"total[:, {along_name(direction.key)}]"
        if direction.per_sample:
            return [f'grads["{direction.key}"] = {self.fresh(rows)}']
        return [f'grads["{direction.key}"] = {rows}.sum(axis=0).reshape({self(direction.wrt)}.shape)']

    def _print_ZeroGradient(self, zero):
        shape = f"(B, {self(zero.wrt.rows)})" if zero.per_sample else f"{self(zero.wrt)}.shape"
        return [f"# {zero.comment}", f'grads["{zero.key}"] = {self.zeros(shape)}']

    def _print_Previous(self, statement):
        state = statement.state
        return [f"{previous_tangent_array(state)} = {tangent_array(state)}  # {statement.comment}"]

    def _print_Assign(self, assign):
        target = tangent_array(assign.target.of)
        if isinstance(assign.value, sp.ZeroMatrix):
            value = self.zeros(f"({DIRECTIONS}, B, {self(assign.target.of.rows)})")
        else:
            value = self(assign.value)
        return ([f"# {assign.comment}"] if assign.comment else []) + [f"{target} = {value}"]

    def _print_AddAlong(self, add):
        line = self.add_into(tangent_array(add.target.of), along_name(add.along.key), self(add.value))
        return [f"{line}  # {add.comment}"]

    def _print_Contract(self, contract):
        rows = f":{DIRECTIONS}" if contract.along is None else along_name(contract.along.key)
        share = self.contraction(contract)
        heading = [f"# {contract.heading}"] if contract.heading else []
        return heading + [f"{self.add_into('total', f':, {rows}', share)}  # {contract.comment}"]

    def contraction(self, contract):
        """sum_k o_dot[p, b, k] dL/do[b, k], per sample (bp)."""
        return self.einsum("pbk,bk->bp", self(contract.tangent), self(contract.adjoint))

    # expressions

    def _print_Tangent(self, expr):
        return self.tangent(expr, None)

    def _print_MatrixSlice(self, expr):
        if isinstance(expr.parent, Tangent):
            return self.tangent(expr, None)
        return super()._print_MatrixSlice(expr)

    def _print_Copy(self, expr):
        return Code(self.fresh(self.operand(expr.value, ATOM)))

    def tangent(self, node, operand, padding=None):
        """Code for node (a Tangent, or a block of one) times operand (a vector expression, or None), the operand
        padded with (left, right) zero columns if given."""
        if isinstance(node, sp.MatrixSlice):  # the block's rows of every direction of the whole parameter
            rows = self.span(*node.rowslice[:2], size=node.parent.shape[0])
            return Code(f"{self.tangent(node.parent, operand, self.padding(node))}[..., {rows}]")
        if isinstance(node, sp.Transpose):  # M_dot^T operand for every direction M_dot = E_ij of a parameter
            if operand is None:
                raise PrintError(f"the forward-mode direction of {notation(node)} must multiply a vector", node)
            rows = self(node.arg.of.shape[1])
            return Code(f"{self.helper('_transposed_directions')}({self(operand)}, {rows})")
        of = node.of
        if isinstance(of, SeqAt):
            reread = of.name in self.previous and time_shift(of.time) == -1
            return Code(previous_tangent_array(of) if reread else tangent_array(of))
        rows, cols = of.shape
        if cols == 1:
            return Code(units_name(rows))
        if operand is None:
            raise PrintError(f"the forward-mode direction of {of.name} must multiply a vector", node)
        vector = self(operand) if padding is None else self.pad_columns(self(operand), *padding)
        return Code(f"{self.helper('_directions')}({vector}, {self(rows)})")

    def padding(self, block):
        """(zero columns left, right) that place the operand of a block of some of a matrix's columns among all its
        columns, so that every direction of the whole matrix applies to it (E_ij of W[:, a:b] v is E_ij of W times v
        placed in columns a:b); None for a block of all its columns."""
        first, stop = block.colslice[:2]
        after = simplified(block.parent.shape[1] - stop)
        return None if first == 0 and after == 0 else (self(first), self(after))

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
    """The Tangent a factor is, or a block or the transpose of."""
    if isinstance(factor, sp.MatrixSlice):
        return factor.parent
    return factor.arg if isinstance(factor, sp.Transpose) else factor
