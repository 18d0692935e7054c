"""torch's sums in place, in a loop's step: out += c (a @ B), out += c (a * b) and out += c a are one call
each (addmm_, addcmul_, add_, scaled by alpha= or value=), where NumPy's in-place printer computes the term
into a scratch array and adds that; out = c + a x is one torch.add. A flow from step t+1 is scaled by its
truncation weight _weights[t], a Python number (_flow_weights). A number that is an operand (c) is a tensor
made once per call: torch wraps a Python operand into a new 0-d tensor at every call. So no step allocates."""

import sympy as sp

from bptt.codegen.ir import PARAMETER, Array, PerCall
from bptt.codegen.printing.function_code import PRODUCT
from bptt.codegen.printing.statements import InPlacePrinter
from bptt.codegen.printing.terms import constant
from bptt.derive.nodes import Diag, OneHot

WEIGHTS = "_weights"  # keep[t] as Python numbers (_flow_weights), all 1 without truncation
WEIGHT = f"{WEIGHTS}[t]"  # the weight of the flow from step t+1 into step t


class InPlaceSums(InPlacePrinter):
    """The in-place statement printer (printing/statements.py) with torch's sums: Accumulate and Flow in a
    loop's step, a term at a time; outside a loop, and for products, NumPy's way. torch/statements.py's
    TorchStatements is this with torch's spelling, calls and step functions."""

    def _print_Flow(self, statement):
        out, rows = self(statement.target), statement.target.rows
        self.used.sizes.add("T")  # the flow only exists for t < T
        self.helper("_flow_weights")
        lines = []
        for term in _terms(statement.value):
            lines += self.add_term(out, term, rows, WEIGHT)
        return self.commented(statement, lines)

    def add_into(self, out, expr, rows, sign="add"):
        if self.stacked or sign == "multiply":
            return super().add_into(out, expr, rows, sign)
        lines = []
        for term in _terms(expr):
            lines += self.add_term(out, term, rows, None, -1 if sign == "subtract" else 1)
        return lines

    def emit_sum(self, terms, out, rows, self_ref):
        affine = None if self.stacked else _affine(terms)
        if affine is None or self.ref(affine[2]) is None:
            return super().emit_sum(terms, out, rows, self_ref)
        shift, coeff, x = affine
        alpha = _keyword("alpha", None if coeff == 1 else self(coeff))
        return [f"torch.add({self.number(shift)}, {self.ref(x)}{alpha}, out={out})"]

    def number(self, value):
        if self.stacked or not sp.sympify(value).is_number:  # a size's fraction (a mean's 1 / n_h): a float
            return super().number(value)
        name = "_number_" + repr(float(value)).replace("-", "minus_").replace(".", "_")
        if name not in self.prepared:
            self.prepared[name] = (f"{name}.fill_({self(value)})", Array(name, sp.S.One, PerCall(1)))
        self.used.arrays.add(name)
        return name

    def add_term(self, out, term, rows, weight, sign=1):
        """Lines for out += sign * weight * term (weight: code, or None for 1), one call where the term is a
        product of a matrix or of two vectors; otherwise the term is computed into scratch first."""
        value = constant(term)
        if value is not None and weight is None:
            return [f"{out}.add_({self.number(sign * value)})"]
        coeff, factors = term.as_coeff_matrices() if isinstance(term, sp.MatMul) else (sp.S.One, [term])
        scale = self.scale(sign * coeff, weight)
        if len(factors) > 1 and not any(isinstance(f, OneHot) for f in factors):
            first, rest = factors[0], _product(factors[1:])
            if isinstance(first, Diag):
                return self.fused("addcmul_", out, (first.vector, rest), ("value", scale))
            if isinstance(first, PARAMETER) or (isinstance(first, sp.Transpose) and isinstance(first.arg, PARAMETER)):
                vector, lines = self.stored(rest, out, may_be_out=False)
                return lines + [f"{out}.addmm_({vector}, {self.gemm_matrix(first)}{_keyword('alpha', scale)})"]
        elif isinstance(term, sp.HadamardProduct) and len(term.args) == 2:
            return self.fused("addcmul_", out, term.args, ("value", scale))
        code, lines = self.stored(_product(factors), out, may_be_out=True)
        return lines + [f"{out}.add_({code}{_keyword('alpha', scale)})"]

    def fused(self, method, out, operands, keyword):
        """out.method(a, b, keyword=scale): the operands stored, or computed into scratch first."""
        codes, lines = [], []
        for operand in operands:
            code, computed = self.stored(operand, out, may_be_out=True)
            codes.append(code)
            lines += computed
        return lines + [f"{out}.{method}({', '.join(codes)}{_keyword(*keyword)})"]

    def stored(self, expr, out, may_be_out):
        """(code, lines): expr's code if it is stored (and, unless may_be_out, not out itself: a product must
        not read what it writes), else a scratch array and the lines that compute expr into it."""
        code = self.ref(expr)
        if code is not None and (may_be_out or code != out):
            return code, []
        scratch = self.scratch.take(expr.shape[0], False)
        return scratch, self.emit(expr, scratch, expr.shape[0])

    def scale(self, coeff, weight):
        """coeff * weight as code; None for 1."""
        if weight is None:
            return None if coeff == 1 else str(self(coeff))
        if coeff == 1:
            return weight
        return f"-{weight}" if coeff == -1 else f"{self.operand(coeff, PRODUCT)} * {weight}"


def _affine(terms):
    """(c, a, x) for the terms c 1 and a x of a sum, c and a numbers; else None."""
    shifts = [term for term in terms if constant(term) is not None]
    if len(terms) != 2 or len(shifts) != 1:
        return None
    term = next(term for term in terms if constant(term) is None)
    coeff, factors = term.as_coeff_matrices() if isinstance(term, sp.MatMul) else (sp.S.One, [term])
    return (constant(shifts[0]), coeff, factors[0]) if len(factors) == 1 else None


def _terms(expr):
    return expr.args if isinstance(expr, sp.MatAdd) else (expr,)


def _product(factors):
    return factors[0] if len(factors) == 1 else sp.MatMul(*factors).doit(deep=False)


def _keyword(name, value):
    return "" if value is None else f", {name}={value}"
