"""torch's statements over the units of a vector in place: a norm's parts (its mean, σ and x̂: reductions, and
1 x 1 values broadcast into the rows), the norm's adjoint, and a vector's adjoint from its slices' (dL/da_t from
dL/df_t, ...), each computed by out= calls into the step's tensors and the workspace's scratch, where the shared
in-place printer (printing/statements.py) writes one expression (`out[...] = ...`), which allocates its
temporaries at every step. A 1 x 1 value is a (B, 1) tensor, which torch broadcasts over the rows."""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.codegen.ir import Array, PerCall
from bptt.codegen.printing.terms import constant, negated
from bptt.codegen.printing.units import of_units, placed_rows
from bptt.derive.blocks import split
from bptt.derive.elementwise import Apply
from bptt.derive.nodes import Diag, SeqAt
from bptt.derive.norm_adjoint import NormAdjoint
from bptt.derive.reductions import Reduce

# a reduction's name -> whether it divides the sum over the last axis by the count of the units (a 0-d tensor
# made once per call: torch.mean, and a Python number as an operand, allocate at every call)
DIVIDED = {"mean": True, "sum": False}
POWERS = {sp.S(2): "torch.square({x}, out={out})", sp.S.Half: "torch.sqrt({x}, out={out})"}
POWERS[sp.S.NegativeOne] = "torch.reciprocal({x}, out={out})"


class UnitsInPlace:
    """A mixin of torch's in-place statement printer (torch/statements.py): emit() of a norm's parts, of its
    adjoint and of a vector's slices' adjoints, by out= calls; the rest as the shared printer emits it."""

    def emit(self, expr, out, rows, self_ref=None):
        if isinstance(expr, NormAdjoint):
            return self.emit_norm_adjoint(expr, out)
        if of_units(expr) and (self_ref is None or not expr.has(self_ref)):
            return self.emit_units(expr, out)
        if placed_rows(expr) and not self.stacked:
            return self.emit_slices(split(expr)[1], out)
        return super().emit(expr, out, rows, self_ref)

    def emit_norm_adjoint(self, expr, out):
        """out = (g − 1 mean(g) − x̂ ⊙ 1 mean(x̂ ⊙ g)) / σ by the runtime's _norm_adjoint_into, in two scratch
        tensors (one of g's rows, one of 1 row)."""
        lines, codes = [], []
        for arg in (expr.g, expr.hat, expr.sigma):
            code, more = self.units_operand(arg)
            codes.append(code)
            lines += more
        rows, means = self.scratch.take(expr.shape[0], self.stacked), self.scratch.take(1, self.stacked)
        codes += [rows, means, self.count(expr.shape[0])]
        centred = "" if expr.centred else ", centred=False"
        call = f"{self.helper('_norm_adjoint_into')}({', '.join(codes)}, out={out}{centred})"
        return lines + [call]

    def emit_norm_part(self, part, v, mu, third, out):
        """A norm's sigma or v_hat (derive/norms.py's Norm.parts), one call of the runtime's _spread_into or
        _normalised_into. third: sigma's eps (a number), v_hat's sigma."""
        v_code, mu_code = self(v), "None" if mu is None else self(mu)
        if part == "hat":
            return [f"{self.helper('_normalised_into')}({v_code}, {mu_code}, {self(third)}, out={out})"]
        eps = "None" if third == 0 else self.number(third)
        rows = self.scratch.take(v.shape[0], self.stacked)
        count = self.count(v.shape[0])
        return [f"{self.helper('_spread_into')}({v_code}, {mu_code}, {eps}, {rows}, {count}, out={out})"]

    def count(self, rows):
        """The name of a 0-d tensor holding the count of a vector's units (4 * n_h), filled once per call."""
        name = "_count_" + str(rows).replace("*", "").replace(" ", "")
        if name not in self.prepared:
            self.prepared[name] = (f"{name}.fill_({self(rows)})", Array(name, sp.S.One, PerCall(1)))
        self.used.arrays.add(name)
        return name

    def emit_slices(self, placed, out):
        """A vector's adjoint from its slices': each block's value computed into its rows of out (out zeroed
        first, and each added in from scratch, unless the blocks tile it)."""
        starts, stops = ({p.block.rowslice[k] for p in placed} for k in (0, 1))
        tiles = len(starts) == len(placed) and starts - {0} == stops - {placed[0].block.parent.shape[0]}
        lines = [] if tiles else [self.calls.line("zero", out=out)]
        for p in placed:
            view = f"{out}[{self.spelling.rows_of(self, p.block)}]"
            held = set(self.scratch.busy)  # each block's scratch is free again for the next
            factors = elementwise_factors(p.value)
            if tiles and factors is not None:
                codes = []
                for factor in factors:
                    code, more = self.units_operand(factor)
                    codes.append(code)
                    lines += more
                lines.append(f"{self.helper('_product_into')}({', '.join(codes)}, out={view})")
            elif tiles:
                lines += self.emit(p.value, view, p.value.shape[0])
            else:
                code, more = self.units_operand(p.value)
                lines += more + [f"{view}.add_({code})"]
            self.scratch.busy.intersection_update(held)
        return lines

    def emit_units(self, expr, out):
        """Lines computing expr, which reduces over the units or broadcasts a 1 x 1 value, into out."""
        code = self.ref(expr)
        if code is not None:
            return [self.calls.line("copy", out=out, x=code)]
        if isinstance(expr, Reduce):
            arg, lines = self.units_operand(expr.arg)
            if DIVIDED[expr.name]:
                return lines + [f"{self.helper('_mean_into')}({arg}, {self.count(expr.arg.shape[0])}, out={out})"]
            return lines + [f"torch.sum({arg}, dim=-1, keepdim=True, out={out})"]
        if norm_part(expr) is not None:
            return self.emit_norm_part(*norm_part(expr), out)
        if isinstance(expr, sp.MatAdd):
            return self.units_sum(list(expr.args), out)
        if isinstance(expr, sp.HadamardProduct):
            return self.units_product(list(expr.args), out)
        if isinstance(expr, sp.HadamardPower):
            base, lines = self.power_base(expr.base, out)
            form = POWERS.get(expr.exp, "torch.pow({x}, {p}, out={out})")
            return lines + [form.format(x=base, p=self(expr.exp), out=out)]
        if isinstance(expr, Apply):
            return self.emit_apply(expr, out, expr.shape[0], None)
        if negated(expr) is not None:
            return self.emit_units(negated(expr), out) + [f"{out}.neg_()"]
        if constant(expr) is not None:
            return [f"{out}.fill_({self.number(constant(expr))})"]
        if scaled(expr) is not None:
            coeff, value = scaled(expr)
            return self.emit_units(value, out) + self.scaled_by(coeff, out)
        if ones_product(expr):
            return self.emit_product(expr, out, expr.shape[0])
        if broadcast(expr) is not None:
            code, lines = self.units_operand(broadcast(expr))
            return lines + [self.calls.line("copy", out=out, x=code)]
        return super().emit(expr, out, expr.shape[0])

    def power_base(self, base, out):
        """(code, lines): a power's base where it is stored, else computed into out (the power then in place)."""
        if self.ref(base) is not None or constant(base) is not None or broadcast(base) is not None:
            return self.units_operand(base)
        return out, self.emit(base, out, base.shape[0])

    def emit_product(self, expr, out, rows):
        """A product through a matrix of ones (a reduction's adjoint or tangent: 1 g / n, 1 1^T v), right to left:
        a ones row 1^T sums the rows (torch.sum, out=), a ones column broadcasts the 1 x 1 value it meets (a
        (B, 1) tensor, broadcast where it is next used), a diagonal or a 1 x 1 value multiplies; the number
        last. Any other product as the shared printer writes it."""
        if not ones_product(expr):
            return super().emit_product(expr, out, rows)
        coeff, factors = expr.as_coeff_matrices()
        acc, lines = self.units_operand(factors[-1])
        for factor in reversed(factors[:-1]):
            if isinstance(factor, OneMatrix) and factor.shape[1] == 1:
                continue  # acc is 1 x 1 here: it broadcasts over the rows as it is
            dest = self.scratch.take(factor.shape[0] if not isinstance(factor, OneMatrix) else 1, self.stacked)
            if isinstance(factor, OneMatrix):  # 1^T (or 1 1^T): each row's sum, broadcast by what follows
                lines.append(f"torch.sum({acc}, dim=-1, keepdim=True, out={dest})")
            else:
                vector, more = self.units_operand(factor.vector if isinstance(factor, Diag) else factor)
                lines += more + [self.calls.line("multiply", a=vector, b=acc, out=dest)]
            acc = dest
        return lines + [self.calls.line("copy", out=out, x=acc)] + self.scaled_by(coeff, out)

    def scaled_by(self, coeff, out):
        """Lines for out *= coeff, a number or a number over a size (a mean's -1/n_h): by per-call tensors."""
        if coeff == 1:
            return []
        numerator, denominator = sp.fraction(sp.sympify(coeff))
        if denominator.is_number:
            return [f"{out}.mul_({self.number(coeff)})"]
        lines = [] if numerator == 1 else [f"{out}.mul_({self.number(numerator)})"]
        return lines + [f"{out}.div_({self.count(denominator)})"]

    def units_sum(self, terms, out):
        """out = the sum of terms: the first term that is neither negated nor a constant computed into out (or
        read where it is stored), the others added or subtracted, each one call."""
        signed = [(-1, negated(term)) if negated(term) is not None else (1, term) for term in terms]
        signed.sort(key=lambda pair: (pair[0] < 0, constant(pair[1]) is not None))
        sign, first = signed[0]
        code = self.ref(first)
        lines = [] if code is not None else self.emit_units(first, out)
        code = code or out
        for sign_k, term in signed[1:]:
            operand, more = self.units_operand(term)
            call = "add" if sign_k > 0 else "subtract"
            lines += more + [self.calls.line(call, a=code, b=operand, out=out)]
            code = out
        if code != out:
            lines.append(self.calls.line("copy", out=out, x=code))
        return lines + ([f"{out}.neg_()"] if sign < 0 else [])

    def units_product(self, args, out):
        """out = the elementwise product of args, the first computed into out unless stored."""
        ordered = sorted(args, key=lambda arg: self.ref(arg) is not None)
        code = self.ref(ordered[0])
        lines = [] if code is not None else self.emit_units(ordered[0], out)
        code = code or out
        for arg in ordered[1:]:
            operand, more = self.units_operand(arg)
            lines += more + [self.calls.line("multiply", a=code, b=operand, out=out)]
            code = out
        if code != out:
            lines.append(self.calls.line("copy", out=out, x=code))
        return lines

    def units_operand(self, expr):
        """(code, lines): a stored value's code, a number's, a 1 x 1 value's where it is broadcast (torch
        broadcasts a (B, 1) tensor), else a scratch tensor of expr's rows and the lines computing it there."""
        code = self.ref(expr)
        if code is not None:
            return str(code), []
        if constant(expr) is not None:
            return self.number(constant(expr)), []
        if broadcast(expr) is not None:
            return self.units_operand(broadcast(expr))
        scratch = self.scratch.take(expr.shape[0], self.stacked)
        return scratch, self.emit(expr, scratch, expr.shape[0])


def norm_part(expr):
    """("sigma", v, mu, eps) for mean((v - 1 mu)^2 + eps 1)^(1/2), ("hat", v, mu, sigma) for (v - 1 mu) * 1
    sigma^(-1), as Norm.parts writes them of stored values (mu None for an RMS norm's: v itself); else None."""
    if isinstance(expr, sp.HadamardPower) and expr.exp == sp.S.Half and isinstance(expr.base, Reduce):
        mean = expr.base
        terms = list(mean.arg.args) if isinstance(mean.arg, sp.MatAdd) else [mean.arg]
        eps = [constant(term) for term in terms if constant(term) is not None]
        squares = [term for term in terms if constant(term) is None]
        if mean.name != "mean" or len(eps) > 1 or len(squares) != 1 or not isinstance(squares[0], sp.HadamardPower):
            return None
        centre = _centred(squares[0].base) if squares[0].exp == 2 else None
        return None if centre is None else ("sigma", *centre, eps[0] if eps else sp.S.Zero)
    if isinstance(expr, sp.HadamardProduct) and len(expr.args) == 2:
        for scale, value in (expr.args, expr.args[::-1]):
            sigma = broadcast(scale)
            if isinstance(sigma, sp.HadamardPower) and sigma.exp == -1 and _stored(sigma.base):
                centre = _centred(value)
                return None if centre is None else ("hat", *centre, sigma.base)
    return None


def _centred(expr):
    """(v, mu) for v - 1 mu, (v, None) for v, v and mu stored values (sequences at a step); else None."""
    if _stored(expr):
        return expr, None
    if isinstance(expr, sp.MatAdd) and len(expr.args) == 2:
        for value, minus in (expr.args, expr.args[::-1]):
            mu = broadcast(negated(minus)) if negated(minus) is not None else None
            if _stored(value) and mu is not None and _stored(mu):
                return value, mu
    return None


def _stored(expr):
    return isinstance(expr, SeqAt)


def elementwise_factors(expr):
    """The columns whose elementwise product expr is (diag(u) diag(v) g, u * v * g), at least two; else None."""
    if isinstance(expr, sp.HadamardProduct):
        factors = [f for arg in expr.args for f in (elementwise_factors(arg) or [arg])]
    elif isinstance(expr, sp.MatMul) and expr.as_coeff_matrices()[0] == 1:
        *diagonals, last = expr.as_coeff_matrices()[1]
        if not all(isinstance(d, Diag) for d in diagonals) or last.shape[1] != 1:
            return None
        factors = [f for d in diagonals for f in (elementwise_factors(d.vector) or [d.vector])]
        factors.append(last)
    else:
        return None
    return factors if len(factors) > 1 else None


def scaled(expr):
    """(c, x) for a number c times one matrix x, else None."""
    if isinstance(expr, sp.MatMul):
        coeff, factors = expr.as_coeff_matrices()
        if coeff != 1 and len(factors) == 1:
            return coeff, factors[0]
    return None


def ones_product(expr):
    """Whether expr is a product of a matrix of ones, diagonals and 1 x 1 values only, one factor a ones row or
    square (a sum over the rows) or a ones column (a broadcast), its last factor any column."""
    if not isinstance(expr, sp.MatMul):
        return False
    factors = expr.as_coeff_matrices()[1]
    allowed = all(isinstance(f, (OneMatrix, Diag)) or f.shape == (1, 1) for f in factors[:-1])
    # a ones row right after a ones column would sum a broadcast value that is not spread over its rows
    pairs = zip(factors, factors[1:], strict=False)
    summed = any(isinstance(a, OneMatrix) and isinstance(b, OneMatrix) for a, b in pairs)
    ones = any(isinstance(f, OneMatrix) for f in factors[:-1]) and not isinstance(factors[-1], OneMatrix)
    return allowed and ones and not summed


def broadcast(expr):
    """x for 1 x (the n x 1 ones times a 1 x 1 value x), else None."""
    if isinstance(expr, sp.MatMul) and len(expr.args) == 2:
        ones, value = expr.args
        if isinstance(ones, OneMatrix) and ones.shape[1] == 1 and value.shape == (1, 1):
            return value
    return None
