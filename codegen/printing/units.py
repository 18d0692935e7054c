"""The in-place printer's statements over the units of a vector (a mixin of printing/statements.py's
InPlacePrinter): a reduction (a norm's mean), a norm's adjoint by the runtime's helper, and a vector's adjoint from
its slices' (dL/da_t from dL/df_t, ...), each into an array that already exists."""

import functools

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.codegen.ir import Array, PerCall
from bptt.codegen.printing.terms import constant
from bptt.derive.atoms import atoms
from bptt.derive.blocks import Placed
from bptt.derive.nodes import Adj, SeqAt
from bptt.derive.reductions import Reduce

REDUCED = {"sum": False, "mean": True}  # the reductions printed in place: whether the row sums are scaled by 1/n


@functools.lru_cache(maxsize=4096)  # every backend's statement printers ask it of the same expressions
def of_units(expr):
    """Whether expr reduces over the units or broadcasts such a 1 x 1 value into them (a norm's mean, σ, x̂)."""
    broadcasts = (
        any(isinstance(f, OneMatrix) and f.shape[1] == 1 != f.shape[0] for f in product.args)
        and not product.args[-1].is_number
        and not isinstance(product.args[-1], OneMatrix)
        for product in atoms(expr, sp.MatMul)
    )
    return expr.has(Reduce) or any(broadcasts)


def broadcast_value(expr):
    """v for the product 1 v of a column of ones and a 1 x 1 value v (a norm's mean broadcast), else None."""
    if isinstance(expr, sp.MatMul) and len(expr.args) == 2 and isinstance(expr.args[0], OneMatrix):
        value = expr.args[1]
        return value if expr.args[0].shape[1] == 1 and value.shape == (1, 1) else None
    return None


def per_call(expr):
    """Whether expr is a reduction that reads no step (mean(g) of a parameter g): a value of no batch and no time
    axis, the same at every step and for every sample."""
    return isinstance(expr, Reduce) and not atoms(expr, SeqAt, Adj)


def placed_rows(expr):
    """Whether expr is a sum of blocks of rows of a vector (blocks.Placed), nothing else."""
    terms = expr.args if isinstance(expr, sp.MatAdd) else (expr,)
    return all(isinstance(term, Placed) and term.shape[1] == 1 for term in terms)


class UnitsStatements:
    """A mixin of the in-place printer: emit()'s statements over the units (reductions, a norm's adjoint, blocks of
    rows), and the per-call vector of weights 1/n a mean over the units is a product with."""

    def unit_weights(self, rows):
        """The name of a vector of `rows` entries 1/rows, made once per call: a mean over the units is one product
        with it (one BLAS call; NumPy's reduction over the last axis and a scaling cost several times as much)."""
        name = "_mean_" + str(rows).replace("*", "").replace(" ", "")
        if name not in self.prepared:
            line = self.calls.line("copy", out=name, x=self.number(1 / rows))
            self.prepared[name] = (line, Array(name, rows, PerCall(1)))
        self.used.arrays.add(name)
        return name

    def reduced_once(self, expr):
        """The name of an array of one entry holding a reduction that reads no step (per_call: mean(g) of a parameter),
        made once per call: it broadcasts as a step's 1 x 1 value does, where the statements of all steps or of a
        step would otherwise reduce it into arrays of their steps and samples. `_mean_of_g`, or numbered for a
        reduction of another expression of parameters (`_sum_of_1`)."""
        name = self.once.get(expr)
        if name is None:
            named = isinstance(expr.arg, sp.MatrixSymbol)
            of = expr.arg.name if named else 1 + sum(not isinstance(e.arg, sp.MatrixSymbol) for e in self.once)
            name = f"_{expr.name}_of_{of}"
            line = self.calls.line("copy", out=name, x=self(expr))
            self.once[expr] = name
            self.prepared[name] = (line, Array(name, sp.S.One, PerCall(1)))
        self.used.arrays.add(name)
        return name

    def emit_placed(self, placed, out):
        """A vector's adjoint from its slices' (dL/da_t from dL/df_t, ...): each block's value into its rows of out,
        out zeroed first unless the blocks tile it."""
        starts, stops = ({p.block.rowslice[k] for p in placed} for k in (0, 1))
        tiles = len(starts) == len(placed) and starts - {0} == stops - {placed[0].block.parent.shape[0]}
        lines = [] if tiles else [self.calls.line("zero", out=out)]
        if tiles and self.calls.rows_out:  # each block computed into its rows (a view), in place
            for p in placed:
                lines += self.emit(p.value, f"{out}[{self.spelling.rows_of(self, p.block)}]", p.value.shape[0])
            return lines
        sign = "=" if tiles else "+="
        return lines + [f"{out}[{self.spelling.rows_of(self, p.block)}] {sign} {self(p.value)}" for p in placed]

    def emit_reduce(self, expr, out):
        """A reduction over the units into out (one row): its vector's row sums, times 1/n for a mean; a mean's
        constant term c 1 (a norm's epsilon) added to the mean, mean(c 1 + v) = c + mean(v), not to every unit."""
        rows, terms = expr.arg.shape[0], expr.arg.args if isinstance(expr.arg, sp.MatAdd) else (expr.arg,)
        scalars = [term for term in terms if constant(term) is not None] if REDUCED[expr.name] else []
        vector = sp.MatAdd(*[term for term in terms if term not in scalars]) if scalars else expr.arg
        arg, lines = self.ref(vector), []
        if arg is None:
            arg = self.scratch.take(rows, self.stacked)
            lines = self.emit(vector, arg, rows)
        if REDUCED[expr.name] and self.calls.mean_units:
            lines.append(self.calls.line("mean_units", x=arg, w=self.unit_weights(rows), out=out))
        else:
            lines.append(self.calls.line("sum_units", x=arg, out=out))
        if REDUCED[expr.name] and not self.calls.mean_units:
            lines.append(self.calls.line("multiply", a=out, b=self.number(1 / rows), out=out))
        return lines + [self.calls.line("add", a=out, b=self.number(constant(c)), out=out) for c in scalars]

    def emit_norm_adjoint(self, expr, out, rows):
        """A norm's adjoint by the runtime's _norm_adjoint into out; its vector g stored, or computed into a scratch
        array first (the helper reads g after it writes out)."""
        g, lines = self.ref(expr.g), []
        if g is None or g == out:
            g = self.scratch.take(rows, self.stacked)
            lines = self.emit(expr.g, g, rows) if self.ref(expr.g) is None else [self.calls.line("copy", out=g, x=out)]
        centred = "" if expr.centred else ", centred=False"
        call = f"{self.helper('_norm_adjoint')}({g}, {self(expr.hat)}, {self(expr.sigma)}{centred}, out={out})"
        return lines + [call]
