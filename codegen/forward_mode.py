"""The forward-mode (RTRL) gradient as IR statements (ir.TangentLoop and its parts), from bptt.derive.rtrl.

One loop per parameter and per initial state, in the order of the gradients' keys. Tangents are
carried for every direction of one parameter at once: an array (P, B, n) for P = the parameter's
size. Every backend prints these statements (tangent_printer.py, torch_rtrl.py, jax_forward_mode.py).
"""

import sympy as sp

from bptt.derive.nodes import Adj, SeqAt
from bptt.derive.rtrl import factored, forward_mode, live_states, reads_parameter
from bptt.derive.tangent import Tangent

from .ir import Assign, Contract, EntersStepOne, TangentArray, TangentLoop, Together, Units, walk
from .text import text


def statements(model):
    """Units for every vector whose directions the loops read, then a TangentLoop per gradient."""
    loops = tuple(parameter_loop(model, param) for param in model.params)
    loops += tuple(initial_state_loop(model, seq) for seq in model.states)
    return tuple(Units(rows) for rows in units_read(loops)) + loops


def parameter_loop(model, param):
    """dL/dparam: the states' tangents along every entry of param, if a state update reads it."""
    mode = forward_mode(model, param)
    carried = reads_parameter(model, param)
    terms = [term for seq in mode.outputs for term in mode.outputs[seq] if carried or not _reads_state(term)]
    live = live_states(model)
    arrays = tuple(TangentArray(seq) for seq in live) if carried else ()
    body = _together(mode, live) if carried else ()
    return _loop(model, param, arrays, body, terms)


def initial_state_loop(model, seq):
    """dL/dseq_0 per sample: seq's tangent starts as every direction of seq_0, the others at zero;
    a teacher-forced seq_0 enters step 1 only."""
    mode = forward_mode(model, seq)
    live = live_states(model)
    forced = seq in model.forced
    arrays = tuple(TangentArray(s) for s in live if s != seq)
    arrays += () if forced else (TangentArray(seq, units=True),)
    body = (EntersStepOne(seq, f"{text(Tangent(seq(0)))} enters step 1 only"),) if forced else ()
    body += _together(mode, live)
    return _loop(model, seq, arrays, body, [term for s in mode.outputs for term in mode.outputs[s]])


def _loop(model, wrt, arrays, body, output_terms):
    key = wrt.name if isinstance(wrt, sp.MatrixSymbol) else f"{wrt.name}0"
    per_sample = not isinstance(wrt, sp.MatrixSymbol)
    output = model.outputs[0][0]
    contract = Contract(factored(output_terms), Adj(output()), per_sample)
    comment = f"{key}: tangents along every entry of {key}" + (", for each sample" if per_sample else "")
    return TangentLoop(key, wrt, arrays, body + (contract,), comment)


def _together(mode, live):
    """(Together,): the live states' tangents at t, updated together from those at t - 1; () if none has terms."""
    assigns = []
    for seq in live:
        terms = mode.local[seq] + mode.carried[seq]
        if terms:
            value = factored(terms)
            assigns.append(Assign(Tangent(seq()), value, f"{text(Tangent(seq()))} = {text(value)}"))
    return (Together(tuple(assigns)),) if assigns else ()


def _reads_state(term):
    return any(isinstance(d.of, SeqAt) for d in term.atoms(Tangent))


def units_read(loops):
    """The rows of every vector whose directions the loops read, in the order they are first read:
    the tangent of a vector parameter, and of an initial state."""
    rows = []
    for loop in loops:
        if loop.per_sample:
            rows.append(loop.wrt.rows)
        for statement in walk(loop.body):
            for expr in _expressions(statement):
                rows += [d.of.rows for d in sorted(expr.atoms(Tangent), key=str) if _is_vector_parameter(d.of)]
    return list(dict.fromkeys(rows))


def _expressions(statement):
    if isinstance(statement, Together):
        return [assign.value for assign in statement.body]
    if isinstance(statement, Contract):
        return [statement.tangent]
    return []


def _is_vector_parameter(node):
    return isinstance(node, sp.MatrixSymbol) and node.shape[1] == 1
