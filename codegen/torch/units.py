"""torch's statements over the units of a vector in place: a norm's parts (its mean, σ and x̂: reductions, and
1 x 1 values broadcast into the rows), the norm's adjoint, and a vector's adjoint from its slices' (dL/da_t from
dL/df_t, ...), each computed by out= calls into the step's tensors and the workspace's scratch, where the shared
in-place printer (printing/statements.py) writes one expression (`out[...] = ...`), which allocates its
temporaries at every step. A 1 x 1 value is a (B, 1) tensor, which torch broadcasts over the rows."""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.codegen.ir import Array, PerCall
from bptt.codegen.printing.statements import of_units, placed_rows
from bptt.codegen.printing.terms import constant, negated
from bptt.derive.blocks import split
from bptt.derive.elementwise import Apply
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
            if tiles:
                lines += self.emit(p.value, view, p.value.shape[0])
                continue
            code, more = self.units_operand(p.value)
            lines += more + [f"{view}.add_({code})"]
        return lines

    def emit_units(self, expr, out):
        """Lines computing expr, which reduces over the units or broadcasts a 1 x 1 value, into out."""
        code = self.ref(expr)
        if code is not None:
            return [self.calls.line("copy", out=out, x=code)]
        if isinstance(expr, Reduce):
            arg, lines = self.units_operand(expr.arg)
            lines.append(f"torch.sum({arg}, dim=-1, keepdim=True, out={out})")
            return lines + ([f"{out}.div_({self.count(expr.arg.shape[0])})"] if DIVIDED[expr.name] else [])
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
        if broadcast(expr) is not None:
            code, lines = self.units_operand(broadcast(expr))
            return lines + [self.calls.line("copy", out=out, x=code)]
        return super().emit(expr, out, expr.shape[0])

    def power_base(self, base, out):
        """(code, lines): a power's base where it is stored, else computed into out (the power then in place)."""
        if self.ref(base) is not None or constant(base) is not None or broadcast(base) is not None:
            return self.units_operand(base)
        return out, self.emit(base, out, base.shape[0])

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


def broadcast(expr):
    """x for 1 x (the n x 1 ones times a 1 x 1 value x), else None."""
    if isinstance(expr, sp.MatMul) and len(expr.args) == 2:
        ones, value = expr.args
        if isinstance(ones, OneMatrix) and ones.shape[1] == 1 and value.shape == (1, 1):
            return value
    return None
