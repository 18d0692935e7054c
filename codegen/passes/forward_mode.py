"""The forward-mode (RTRL) gradient as IR statements (ir.TangentLoop and its parts), from bptt.derive.rtrl.

One loop per parameter and per initial state, in the order of the gradients' keys. Tangents are
carried for every direction of one parameter at once: an array (P, B, n) for P = the parameter's
size. A step assigns its named tangents in the step's order, each written through those before it.
Every backend prints these statements (printing/tangents.py, torch/rtrl.py, jax/forward_mode.py).
"""

import sympy as sp

from bptt.codegen.ir import (
    Assign,
    Contract,
    EntersStepOne,
    Previous,
    TangentArray,
    TangentLoop,
    Units,
    ZeroGradient,
    walk,
)
from bptt.codegen.text import text
from bptt.derive.nodes import Adj, SeqAt, t
from bptt.derive.rtrl import factored, forward_mode
from bptt.derive.tangent import Tangent


def statements(model):
    """Units for every vector whose directions the loops read, then a TangentLoop per gradient (a
    ZeroGradient for one that no output depends on)."""
    loops = tuple(parameter_loop(model, param) for param in model.params)
    loops += tuple(initial_state_loop(model, seq) for seq in model.states)
    return tuple(Units(rows) for rows in units_read(loops)) + loops


def parameter_loop(model, param):
    """dL/dparam: the tangents along every entry of param of the states that depend on it."""
    mode = forward_mode(model, param)
    arrays = tuple(TangentArray(seq) for seq in mode.carried)
    return _loop(model, param, arrays, (), mode)


def initial_state_loop(model, seq):
    """dL/dseq_0 per sample: seq's tangent starts as every direction of seq_0, the others at zero.
    A seq_0 that no step's tangent carries on (teacher-forced, say) enters step 1 only."""
    mode = forward_mode(model, seq)
    enters = seq not in mode.tangents
    arrays = tuple(TangentArray(s, units=s == seq) for s in mode.carried if not (enters and s == seq))
    head = (EntersStepOne(seq, f"{text(Tangent(seq(0)))} enters step 1 only"),) if enters else ()
    return _loop(model, seq, arrays, head, mode)


def _loop(model, wrt, arrays, head, mode):
    key = wrt.name if isinstance(wrt, sp.MatrixSymbol) else f"{wrt.name}0"
    per_sample = not isinstance(wrt, sp.MatrixSymbol)
    output = model.outputs[0][0]
    output_terms = [term for seq in mode.outputs for term in mode.outputs[seq]]
    if not output_terms:
        return ZeroGradient(key, wrt, f"{key}: zero, no output's tangent depends on {key}")
    contract = Contract(factored(output_terms), Adj(output()), per_sample)
    steps = tuple(_assign(seq, terms) for seq, terms in mode.tangents.items())
    previous = tuple(Previous(s, f"{text(Tangent(s(t - 1)))}, read after {text(Tangent(s()))}") for s in _reread(mode))
    comment = f"{key}: tangents along every entry of {key}" + (", for each sample" if per_sample else "")
    return TangentLoop(key, wrt, arrays, previous + head + steps + (contract,), comment)


def _assign(seq, terms):
    value = factored(terms)
    return Assign(Tangent(seq()), value, f"{text(Tangent(seq()))} = {text(value)}")


def _reread(mode):
    """The states whose tangent at t - 1 the step reads after assigning theirs at t, in the step's order."""
    assigned, reread = [], []
    readers = list(mode.tangents.items()) + [(None, terms) for terms in mode.outputs.values()]
    for seq, terms in readers:
        reads = {d.of.name for term in terms for d in term.atoms(Tangent) if _at_previous_step(d.of)}
        reread += [state for state in assigned if state.name in reads and state not in reread]
        assigned += [seq] if seq in mode.carried else []
    return reread


def _at_previous_step(node):
    return isinstance(node, SeqAt) and sp.simplify(node.time - t) == -1


def units_read(loops):
    """The rows of every vector whose directions the loops read, in the order they are first read:
    the tangent of a vector parameter, and of an initial state."""
    rows = []
    for loop in loops:
        if isinstance(loop, ZeroGradient):
            continue
        if loop.per_sample:
            rows.append(loop.wrt.rows)
        for statement in walk(loop.body):
            for expr in _expressions(statement):
                rows += [d.of.rows for d in sorted(expr.atoms(Tangent), key=str) if _is_vector_parameter(d.of)]
    return list(dict.fromkeys(rows))


def _expressions(statement):
    if isinstance(statement, Assign):
        return [statement.value]
    if isinstance(statement, Contract):
        return [statement.tangent]
    return []


def _is_vector_parameter(node):
    return isinstance(node, sp.MatrixSymbol) and node.shape[1] == 1
