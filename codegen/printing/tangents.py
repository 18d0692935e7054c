"""Print the forward-mode statements (ir.Units, ir.TangentLoop and its parts) as NumPy loops; torch/rtrl.py
and jax/forward_mode.py print the same statements with their own arrays (and JAX as scans).

A tangent array has a leading axis of directions, (P, B, n). The tangent of a matrix parameter
applied to a vector v, every direction E_ij at once, is `_directions(v, rows)`; that of a vector
parameter is every direction of a vector, an array bound once (`units_n_h`).
"""

import sympy as sp

from bptt.codegen.array_names import previous_tangent_array, tangent_array, units_name
from bptt.codegen.ir import EntersStepOne, Previous
from bptt.codegen.printing.printer import PRODUCT, Code, PrintError, RowPrinter
from bptt.derive.nodes import SeqAt, t
from bptt.derive.tangent import Tangent


class TangentPrinter(RowPrinter):
    """Row form with a leading axis of directions for tangents; forward-mode statements as for-loops."""

    previous = frozenset()  # the states whose tangents at t - 1 the loop being printed reads from dot_S_prev

    # the arrays a backend makes (torch/rtrl.py and jax/forward_mode.py override them)

    def zeros(self, shape):
        return f"np.zeros({shape}, dtype)"

    def ones(self, shape):
        return f"np.ones({shape}, dtype)"

    def zeros_like(self, code):
        return f"np.zeros_like({code})"

    def einsum(self, spec, *operands):
        return f'np.einsum("{spec}", {", ".join(operands)})'

    def entries(self, code):
        """The number of entries of an array."""
        return f"{code}.size"

    # statements

    def lines(self, statements):
        return [line for statement in statements for line in self._print(statement)]

    def _print_Units(self, units):
        every = f"{self.helper('_directions')}({self.ones('(B, 1)')}, {self(units.rows)})"
        return [f"{units_name(units.rows)} = {every}  # every direction of a vector of {units.rows} entries"]

    def directions(self, loop):
        """P, the number of directions of a loop: an initial state's rows, a parameter's entries."""
        return self(loop.wrt.rows) if loop.per_sample else self.entries(self(loop.wrt))

    def start(self, array, size):
        """A tangent before step 1: every direction of the initial state, or zero."""
        return units_name(array.state.rows) if array.units else self.zeros(f"({size}, B, {self(array.state.rows)})")

    def begin(self, loop):
        """Before printing a loop's body: the states whose tangents at t - 1 it reads from dot_S_prev."""
        self.previous = {s.state.name for s in loop.body if isinstance(s, Previous)}

    def _print_TangentLoop(self, loop):
        self.begin(loop)
        size = self.directions(loop)
        out = [f"# {loop.comment}"]
        out += [f"{tangent_array(array.state)} = {self.start(array, size)}" for array in loop.arrays]
        entering = [s for s in loop.body if isinstance(s, EntersStepOne)]
        out += [f"zero = {self.zeros_like(units_name(s.state.rows))}" for s in entering]
        out.append(f"total = {self.zeros(f'(B, {size})' if loop.per_sample else size)}")
        out.append("for t in range(1, T + 1):")
        out += ["    " + line for line in self.lines(loop.body)]
        return out + [f'grads["{loop.key}"] = total' + ("" if loop.per_sample else f".reshape({loop.key}.shape)")]

    def _print_ZeroGradient(self, zero):
        shape = f"(B, {self.directions(zero)})" if zero.per_sample else f"{self(zero.wrt)}.shape"
        return [f"# {zero.comment}", f'grads["{zero.key}"] = {self.zeros(shape)}']

    def _print_EntersStepOne(self, statement):
        units = units_name(statement.state.rows)
        return [f"{tangent_array(statement.state)} = {units} if t == 1 else zero  # {statement.comment}"]

    def _print_Previous(self, statement):
        state = statement.state
        return [f"{previous_tangent_array(state)} = {tangent_array(state)}  # {statement.comment}"]

    def _print_Assign(self, assign):
        return [f"{tangent_array(assign.target.of)} = {self(assign.value)}  # {assign.comment}"]

    def _print_Contract(self, contract):
        return [f"total += {self.contraction(contract)}"]

    def contraction(self, contract):
        """sum_k o_dot[p, b, k] dL/do[b, k]: over the batch too (p), or per sample (bp)."""
        spec = "pbk,bk->bp" if contract.per_sample else "pbk,bk->p"
        return self.einsum(spec, self(contract.tangent), self(contract.adjoint))

    # expressions

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
            reread = of.name in self.previous and sp.simplify(of.time - t) == -1
            return Code(previous_tangent_array(of) if reread else tangent_array(of))
        rows, cols = of.shape
        if cols == 1:
            return Code(units_name(rows))
        if operand is None:
            raise PrintError(f"the tangent of {of.name} must multiply a vector")
        return Code(f"{self.helper('_directions')}({self(operand)}, {self(rows)})")

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
