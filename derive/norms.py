"""Layer norm and RMS norm, defined as steps of the model language (Ba, Kiros and Hinton 2016; Zhang and Sennrich
2019):

    layer_norm(v, gain, bias, eps):  mu = mean(v),  sigma = (mean((v - mu)^2 + eps))^(1/2),
                                     v_hat = (v - mu) / sigma,  gain * v_hat + bias
    rms_norm(v, gain, eps):          sigma = (mean(v^2 + eps))^(1/2),  v_hat = v / sigma,  gain * v_hat

with the gain and the bias left out where the user omits them, and eps a positive rational or 0 (inside the mean:
mean(c^2 + eps) = var + eps, a scalar in a sum of columns as `1 - z_t` is, where var + eps would be a 1 x 1 sum).

A norm in an equation is a Norm node, which the Model expands into named intermediates of its own (expand_norms):
for `h_t = tanh(layer_norm(a_t))` the steps mu_a (1 x 1), sigma_a (1 x 1) and a_hat (n x 1) come before h_t,
which reads gain * a_hat + bias; an input that is not a sequence's value at t (W h_{t-1}) is named first, after
the equation's sequence (h_in), so that it is computed once. So the derivation shows the parts, and the backward
reads the forward's sigma and v_hat as it reads any intermediate (kept or recomputed by the checkpoint and
truncation machinery alike); the mean and the variance are O(n) reductions over the units.
"""

import sympy as sp
from sympy.core.symbol import Str

from bptt.derive.column import Column
from bptt.derive.model_error import ModelError
from bptt.derive.nodes import SeqAt, t
from bptt.derive.reductions import mean
from bptt.derive.written import note_replaced

KINDS = ("layer_norm", "rms_norm")


class NormError(ModelError):
    """A norm's arguments that do not describe one; the message names the argument."""


class Norm(Column):
    """layer_norm(v, gain, bias, eps) or rms_norm(v, gain, eps); a missing gain or bias is the number 0."""

    def __new__(cls, kind, v, gain, bias, eps):
        return Column.__new__(cls, Str(kind) if isinstance(kind, str) else kind, v, gain, bias, sp.sympify(eps))

    kind = property(lambda self: self.args[0].name)
    arg = property(lambda self: self.args[1])
    gain = property(lambda self: None if self.args[2] == 0 else self.args[2])
    bias = property(lambda self: None if self.args[3] == 0 else self.args[3])
    eps = property(lambda self: self.args[4])
    shape = property(lambda self: self.args[1].shape)

    def parts(self, v, mu=None, sigma=None):
        """[(part, its expression)] and the norm's value, for its input v and the named mu and sigma if given
        (else inline): mu and sigma for a layer norm, sigma for an RMS norm, then v_hat."""
        steps = []
        centred = v
        if self.kind == "layer_norm":
            steps.append(("mu", mean(v)))
            centred = v - (mu if mu is not None else mean(v))  # the 1 x 1 mean broadcast (column.py)
        squares = sp.HadamardPower(centred, 2)
        spread = mean(squares + self.eps if self.eps != 0 else squares)  # var + eps, as mean(cen^2 + eps)
        steps.append(("sigma", sp.HadamardPower(spread, sp.Rational(1, 2))))
        sigma = sigma if sigma is not None else steps[-1][1]
        steps.append(("hat", centred / sigma))  # centred * 1 sigma^(-1) (column.py)
        return steps

    def value(self, v_hat):
        """gain * v_hat + bias, without the ones the user left out."""
        value = v_hat if self.gain is None else sp.HadamardProduct(self.gain, v_hat)
        return value if self.bias is None else value + self.bias

    def inline(self):
        """The norm as one expression of its input (no named parts): the oracle's and the rules' fallback."""
        return self.value(self.parts(self.arg)[-1][1])


def _eps(eps, kind):
    """eps as a SymPy rational: a positive rational (a float, NumPy's too, as its shortest decimal digits say, 1e-5
    as 1/100000) or 0; not a bool."""
    try:
        value = None if isinstance(eps, bool) else sp.Rational(str(eps) if _is_float(eps) else eps)
    except (TypeError, ValueError):
        value = None
    if value is None or value < 0:
        raise NormError(f"{kind}: eps must be a positive rational or 0, not {eps!r}")
    return value


def _is_float(value):
    """A Python float, or NumPy's (without importing NumPy: its floats name their type so)."""
    return isinstance(value, float) or type(value).__module__ == "numpy" and "float" in type(value).__name__


def _column(value, v, what, kind):
    """The gain or the bias: None, or a column of v's rows."""
    if value is None:
        return sp.S.Zero
    if not isinstance(value, sp.MatrixExpr) or value.shape != v.shape:
        shape = f"shape {value.shape[0]} x {value.shape[1]}" if isinstance(value, sp.MatrixExpr) else repr(value)
        raise NormError(f"{kind}: the {what} must be a column of the input's {v.shape[0]} rows, not {shape}")
    return value


def _norm(kind, v, gain, bias, eps):
    if not isinstance(v, sp.MatrixExpr) or v.shape[1] != 1:
        raise NormError(f"{kind}: the input must be a column vector, not {v!r}")
    return Norm(kind, v, _column(gain, v, "gain", kind), _column(bias, v, "bias", kind), _eps(eps, kind))


def layer_norm(v, gain=None, bias=None, eps=0):
    """gain * (v - mean(v)) / (var(v) + eps)^(1/2) + bias over the units of the column v (Ba et al. 2016)."""
    return _norm("layer_norm", v, gain, bias, eps)


def rms_norm(v, gain=None, eps=0):
    """gain * v / (mean(v^2) + eps)^(1/2) over the units of the column v (Zhang and Sennrich 2019)."""
    return _norm("rms_norm", v, gain, None, eps)


def expand_norms(steps, outputs, sequence, taken):
    """(steps, outputs) with each Norm in an equation replaced by gain * a_hat + bias and its parts named
    intermediates placed before the equation (after the steps, for an output's); `sequence(name, rows, role)`
    makes a Seq, `taken` holds the names the model uses already."""
    taken = set(taken)
    expanded = {"steps": [], "outputs": []}
    for where, pairs in (("steps", steps), ("outputs", outputs)):
        for seq, rhs in pairs:
            parts, rhs = _expanded(seq.name, rhs, sequence, taken)
            expanded["steps"] += parts
            expanded[where].append((seq, rhs))
    return tuple(expanded["steps"]), tuple(expanded["outputs"])


def _expanded(name, rhs, sequence, taken):
    """(the named parts of rhs's outermost norms, rhs with each replaced by its value); a norm inside a norm's
    input is expanded as that input is named, one inside its gain or bias as that argument (its parts first)."""
    norms = list(dict.fromkeys(_outermost(rhs)))
    parts, replaced = [], {}
    for k, norm in enumerate(norms, start=1):
        prefix = name if len(norms) == 1 else f"{name}{k}"
        gain, bias = norm.args[2:4]
        if gain.has(Norm) or bias.has(Norm):
            inner_gain, gain = _expanded(f"{prefix}_gain", gain, sequence, taken)
            inner_bias, bias = _expanded(f"{prefix}_bias", bias, sequence, taken)
            parts += inner_gain + inner_bias
            norm_value = Norm(norm.kind, norm.arg, gain, bias, norm.eps).value
        else:
            norm_value = norm.value
        named, v_hat = _named_parts(norm, prefix, sequence, taken)
        parts += named
        replaced[norm] = norm_value(v_hat)
    note_replaced(replaced)  # the sums that held a norm, in the order written
    return parts, rhs.xreplace(replaced) if replaced else rhs


# The parts of a norm named after the value they describe, mu_a_in: documents subscript them with its symbol.
STATISTICS = ("mu", "sigma")


def _outermost(expr):
    if isinstance(expr, Norm):
        return [expr]
    return [norm for arg in getattr(expr, "args", ()) for norm in _outermost(arg)]


def _named_parts(norm, prefix, sequence, taken):
    """The named steps of one norm and v_hat's value at t: for the norm of a value a_t, mu_a, sigma_a and a_hat
    (LaTeX's mu, sigma and a hat); of an expression, that expression first as {prefix}_in."""
    steps = []

    def name(chosen, rows, expr):
        stem, k = chosen, 2
        while chosen in taken:
            chosen, k = f"{stem}{k}", k + 1
        taken.add(chosen)
        seq = sequence(chosen, rows, "intermediate")
        steps.append((seq, expr))
        return seq(t)

    v = norm.arg
    if not (isinstance(v, SeqAt) and v.time == t):
        inner, value = _expanded(f"{prefix}_in", v, sequence, taken)
        steps += inner
        v = name(f"{prefix}_in", v.shape[0], value)
    names = {**{part: f"{part}_{v.name}" for part in STATISTICS}, "hat": f"{v.name}_hat"}
    named = {}
    for part, _ in norm.parts(v):
        expr = dict(norm.parts(v, named.get("mu"), named.get("sigma")))[part]
        named[part] = name(names[part], 1 if part != "hat" else v.shape[0], expr)
    return steps, named["hat"]
