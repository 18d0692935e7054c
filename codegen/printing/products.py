"""How the expression printers print matrix products: a factor at a time onto the row form of the vector on
the right (W v as `v @ W.T`, diag(u) v as `u * v`), a one-hot column as a lookup, and a parameter gradient's
sum over time as one product over all T*B rows. The base of printer.RowPrinter."""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.codegen.ir import PARAMETER
from bptt.codegen.printing.code import Code, PrintError, no_factor_code
from bptt.codegen.printing.dispatch import Dispatching
from bptt.codegen.printing.function_code import ATOM, POWER, PRODUCT, SUM, UNARY
from bptt.derive.nodes import Diag, OneHot
from bptt.derive.text import described, notation

ONES = "_ones"  # the work array of T*B ones that sums over all steps and samples


class ProductPrinting(Dispatching):
    """_print_MatMul and _print_TimeSum for a printer with operand, label, helper, at, used and spelling."""

    def _print_MatMul(self, expr):
        coeff, factors = expr.as_coeff_matrices()
        if isinstance(factors[-1], OneHot):  # P onehot(x) is a lookup of column x of P
            acc, factors = self.lookup(factors[-2], factors[-1]), factors[:-2]
        else:
            acc, factors = self._print(factors[-1]), factors[:-1]
        for k in reversed(range(len(factors))):
            if not _broadcast_into(factors, k):
                acc = self.apply(factors[k], acc, expr)
        if coeff == 1:
            return acc
        if coeff == -1:
            return Code(f"-{acc if acc.level >= POWER else f'({acc})'}", UNARY)
        scalar = self.operand(coeff, POWER)
        return Code(f"{scalar} * {acc if acc.level >= POWER else f'({acc})'}", PRODUCT)

    def lookup(self, matrix, onehot):
        label = self.label(onehot.label)
        if isinstance(matrix, sp.Transpose) and isinstance(matrix.arg, sp.MatrixSymbol):
            return Code(f"{self._print(matrix.arg)}[{label}]")
        if isinstance(matrix, sp.MatrixSymbol):
            return Code(f"{self._print(matrix)}.T[{label}]")
        raise PrintError(f"a one-hot vector must be multiplied by a parameter, not by {described(matrix)}", matrix)

    def apply(self, factor, acc, expr):
        """factor times the vector whose row form is acc."""
        if isinstance(factor, Diag):  # diag(1 s) v as s * v, the array broadcasting s
            right = acc if acc.level >= POWER else f"({acc})"
            plain = _broadcast_value(factor.vector) if factor.shape[0] != 1 else None
            vector = factor.vector if plain is None else plain
            return Code(f"{self.operand(vector, POWER)} * {right}", PRODUCT)
        if isinstance(factor, OneMatrix):  # ones(r x c) v: the sum of v's entries in each of r rows
            return self.spelling.ones_times(self, acc, factor)
        left = acc if acc.level >= PRODUCT else f"({acc})"
        if isinstance(factor, sp.Transpose) and isinstance(factor.arg, PARAMETER):
            return Code(f"{left} @ {self._print(factor.arg)}", PRODUCT)
        if isinstance(factor, PARAMETER):
            return Code(f"{left} @ {self._print(factor)}.T", PRODUCT)
        raise no_factor_code(factor)

    # parameter gradients and losses, for all steps

    def _print_TimeSum(self, expr):
        terms = expr.body.args if isinstance(expr.body, sp.MatAdd) else (expr.body,)
        stacked = self.at(True)
        return Code(" + ".join(stacked.gradient_term(term) for term in terms), SUM if len(terms) > 1 else PRODUCT)

    def gradient_term(self, term):
        """Code for one term of sum_t (...) of a parameter gradient: a sum over the T*B rows as
        a product with ones, an outer product as one (T*B)-long product (transposed: BLAS is faster so)."""
        rows = self._print(term.shape[0])
        if term.shape[1] == 1:
            return self.spelling.vector_sum(self, term, rows)
        column, vector = outer_factors(term)
        left = self.operand(column, ATOM)
        if isinstance(vector, OneHot):  # sum_t g_t onehot(x_t)^T adds g_t into column x_t
            columns = self._print(vector.shape[0])
            return f"{self.helper('_scatter_columns')}({left}, {self.label(vector.label)}, {columns})"
        right = self.operand(vector, ATOM)
        return f"({right}.reshape(-1, {self._print(vector.shape[0])}).T @ {left}.reshape(-1, {rows})).T"


def outer_factors(term):
    """(u, v) for a gradient term u v^T: the product of the factors up to the first column vector, and the
    transpose of the rest, which may be any vector-valued expression ((r_t ⊙ h_{t-1})^T, x_t^T W^T)."""
    coeff, factors = term.as_coeff_matrices()
    split = next((k + 1 for k, factor in enumerate(factors) if _column(factor, factors[k + 1 :])), None)
    if split is None or split == len(factors):
        raise PrintError(f"a parameter's gradient term must be a column times a row: {notation(term)}", term)
    column = sp.MatMul(coeff, *factors[:split]).doit(deep=False)
    row = sp.MatMul(*factors[split:]).doit(deep=False) if len(factors) > split + 1 else factors[split]
    return column, sp.transpose(row)


def _column(factor, rest):
    """Whether factor is the column vector ending u in u v^T: one column, and not an operator on the vector after it,
    a diag of a 1 x 1 value (diag(s) g) or the ones that broadcast a 1 x 1 value (1 mean(v))."""
    if factor.shape[1] != 1 or isinstance(factor, Diag):
        return False
    return not (isinstance(factor, OneMatrix) and rest and rest[0].shape == (1, 1))


def _broadcast_into(factors, k):
    """Whether factors[k] is the ones that broadcast a 1 x 1 value into a diag(u) of full vectors next to its left,
    diag(u) 1 s, which the arrays compute as u * s without the repeated copy."""
    factor = factors[k]
    if not (isinstance(factor, OneMatrix) and factor.shape[1] == 1 and factor.shape[0] != 1 and k > 0):
        return False
    left = factors[k - 1]
    return isinstance(left, Diag) and _broadcast_value(left.vector) is None


def unbroadcast(operands):
    """The operands of a sum or an elementwise product, each 1 m that broadcasts a 1 x 1 value m (a mean) as m
    itself when another operand has the rows: the arrays broadcast it, so no repeated copy is made."""
    plain = [_broadcast_value(operand) for operand in operands]
    if all(value is not None for value in plain):
        return list(operands)
    return [operand if value is None else value for operand, value in zip(operands, plain, strict=True)]


def _broadcast_value(operand):
    """c m for an operand c 1 m (1 a column of ones, m 1 x 1), else None."""
    if not isinstance(operand, sp.MatMul):
        return None
    coeff, factors = operand.as_coeff_matrices()
    if len(factors) < 2 or not (isinstance(factors[0], OneMatrix) and factors[0].shape[1] == 1):
        return None
    rest = sp.MatMul(*factors[1:]).doit(deep=False) if len(factors) > 2 else factors[1]
    return rest if coeff == 1 else sp.MatMul(coeff, rest).doit(deep=False)
