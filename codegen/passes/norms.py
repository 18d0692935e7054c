"""A layer norm's centred vector computed once (NumPy's in-place statements).

Norm.parts (derive/norms.py) writes σ_t = mean((v_t − 1 μ_t)² + ε 1)^(1/2) and x̂_t = (v_t − 1 μ_t) ⊙ 1 σ_t⁻¹: v − 1 μ
twice, each a pass over the vector. centred_norms computes it once, into x̂_t's own array: x̂_t = v_t − 1 μ_t, then
σ_t = mean(x̂_t² + ε 1)^(1/2), then x̂_t = x̂_t ⊙ 1 σ_t⁻¹ in place (a target read in its own value stands for what it
holds already, ir.Assign). An RMS norm has no centre and is kept as it is.
"""

from dataclasses import replace

import sympy as sp

from bptt.codegen.ir import Assign, Loop
from bptt.derive.nodes import SeqAt
from bptt.derive.reductions import Reduce
from bptt.derive.text import text


def centred_norms(program):
    """The Program with each layer norm's σ and x̂ in the forward pass (in its loop, or for all steps before it)
    reading the centred vector once, from x̂'s array."""
    forward = program.forward
    statements = [replace(s, body=_centred(s.body)) if isinstance(s, Loop) else s for s in forward.statements]
    return replace(program, forward=replace(forward, statements=_centred(statements)))


def _centred(statements):
    """The statements with each σ, x̂ pair rewritten as the module says."""
    out = list(statements)
    for index, statement in enumerate(statements):
        centre = _spread_centre(statement)
        if centre is None:
            continue
        hat = next((s for s in statements[index + 1 :] if _normalises(s, centre, statement.target)), None)
        if hat is None:
            continue
        comment = f"{text(centre)} into {text(hat.target)}, once (divided by {text(statement.target)} below)"
        first = Assign(hat.target, centre, comment)
        at = out.index(statement)
        out[at : at + 1] = [first, replace(statement, value=statement.value.xreplace({centre: hat.target}))]
        out[out.index(hat)] = replace(hat, value=hat.value.xreplace({centre: hat.target}))
    return tuple(out)


def _spread_centre(statement):
    """v − 1 μ if statement assigns a σ, mean((v − 1 μ)² + ε 1)^(1/2), of a centred vector (a sum); else None."""
    if not (isinstance(statement, Assign) and isinstance(statement.target, SeqAt)):
        return None
    value = statement.value
    if not (isinstance(value, sp.HadamardPower) and value.exp == sp.S.Half and isinstance(value.base, Reduce)):
        return None
    terms = value.base.arg.args if isinstance(value.base.arg, sp.MatAdd) else (value.base.arg,)
    squares = [term for term in terms if isinstance(term, sp.HadamardPower) and term.exp == 2]
    return squares[0].base if len(squares) == 1 and isinstance(squares[0].base, sp.MatAdd) else None


def _normalises(statement, centre, sigma):
    """Whether statement assigns x̂ = centre ⊙ (a broadcast of sigma⁻¹) to a value of its own."""
    if not (isinstance(statement, Assign) and isinstance(statement.target, SeqAt)):
        return False
    value = statement.value
    return (
        isinstance(value, sp.HadamardProduct)
        and len(value.args) == 2
        and centre in value.args
        and value.has(sigma)
        and not centre.has(statement.target)
    )
