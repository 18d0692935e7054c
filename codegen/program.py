"""Turn a model's derivation into the statements of its generated module: an ir.Program.

Only the recursions loop over time. Everything else (input projections,
outputs, local adjoint terms, parameter gradients) is one stacked statement
over all steps. optimize.py and fuse.py then rewrite the statements for speed:
what backward never reads is not stored, loop-invariant factors leave the loop,
gate products that share an operand become one product.
"""

import functools
from dataclasses import dataclass

import sympy as sp

from bptt.codegen.ir import Accumulate, Array, Assign, Flow, Guard, Initial, Loop, Pass, Program, Steps, ZerosLike, walk
from bptt.codegen.passes import checkpoint, forward_mode, fuse, optimize
from bptt.codegen.passes.collect import collect_products
from bptt.codegen.passes.fresh import fresh_returns, shared_rows
from bptt.codegen.passes.fuse_backward import stacked_window
from bptt.codegen.passes.halve import halved_sigmoids
from bptt.codegen.passes.loops import backward_schedule, forward_schedule
from bptt.codegen.passes.slopes import name_slopes
from bptt.codegen.passes.split import split_activations
from bptt.derive.bptt import derive
from bptt.derive.nodes import Adj, matrix_sum, values
from bptt.derive.text import equation, text


@functools.cache  # a backend prints the same statements of a model every time
def build(model, passes=()):
    """The model's Program: shared(model), rewritten by `passes` (a backend's own, each Program -> Program, in
    order: NUMPY_PASSES, TORCH_PASSES, JAX_PASSES below)."""
    return rewritten(shared(model), passes)


def rewritten(program, passes):
    """program rewritten by each pass in turn."""
    return functools.reduce(lambda done, rewrite: rewrite(done), passes, program)


@functools.cache  # every backend starts from the same statements of a model
def shared(model):
    """The Program every backend's passes start from: the derivation's statements, the forward loop fused and
    hoisted (forward_pass), the backward pass's statements made fast (optimize.backward), checkpoints planned."""
    derivation = derive(model, named="all", loss=model.concrete_loss())
    statements, recurrent = backward_statements(derivation)
    initial = initial_gradients(derivation, recurrent)
    returns = [
        (p.name, _zeros_like(derivation.param_gradient(p), p), f"dL/d{p.name} = {text(derivation.param_gradient(p))}")
        for p in model.params
    ]
    statements, initial, returns = name_slopes(statements, initial, returns)
    recurrent = _recurrent(statements, recurrent)
    read = {s.name for s in model.states}
    for expr in [_value(s) for s in walk(statements)] + [i.value for i in initial] + [r[1] for r in returns]:
        read |= values_read(expr)
    cached = tuple(seq.name for seq in model.states + model.intermediates if seq.name in read)
    forward = forward_pass(model, cached)
    adjoints, fast_initial, gradients, fast_returns = optimize.backward(statements, initial, returns, forward.stacks)
    products = {statement.target.name for statement in gradients.statements}
    fast_returns, fast_initial, initial = fresh_returns(fast_returns, fast_initial, initial, products)
    adjoints, crossings = checkpoint.with_boundaries(adjoints)
    window, window_crossings = checkpoint.with_boundaries(Pass(tuple(statements)))
    cache = (model.inputs[0].name, *cached)
    return Program(
        model=model,
        cache=cache,
        forward=forward,
        adjoints=adjoints,
        window=window,
        initial=tuple(fast_initial),
        window_initial=tuple(initial),
        gradients=gradients,
        returns=tuple(fast_returns),
        owned_returns=tuple((key, shared_rows(value), comment) for key, value, comment in fast_returns),
        recurrent=tuple(sorted(_aged(statements, recurrent))),
        forward_mode=Pass(forward_mode.statements(model)),
        checkpoints=checkpoint.plan(
            model, forward, adjoints, statements, cache, crossings, window_crossings, recurrent
        ),
    )


# Each backend's own passes, after those every backend shares; its render.py builds with its list. Halved
# sigmoids pay in NumPy's in-place loops (a sigmoid is several calls there) and, measured, in torch's LSTM (not
# clearly in its GRU); not in JAX's functional code. JAX's backward prints the window pass, so its flows through
# the gates' weights are stacked there.
NUMPY_PASSES = (halved_sigmoids,)
TORCH_PASSES = (halved_sigmoids,)
JAX_PASSES = (stacked_window,)


def _zeros_like(value, like):
    """A zero gradient as zeros shaped like the parameter or initial state (ir.ZerosLike); others as they are."""
    return ZerosLike(like) if isinstance(value, sp.ZeroMatrix) else value


def _recurrent(statements, recurrent):
    """The recurrent adjoints, with those that read one (a named slope of a recurrent one)."""
    recurrent = set(recurrent)
    for statement in walk(statements):
        if (
            isinstance(getattr(statement, "target", None), Adj)
            and {a.of.name for a in statement.value.atoms(Adj)} & recurrent
        ):
            recurrent.add(statement.target.of.name)
    return recurrent


def _aged(statements, recurrent):
    """The adjoints that carry an age axis in a window: the recurrent ones, and those a flow from step t+1
    reads (a local adjoint there enters at age 0, not at every age of the flow it joins)."""
    read = {a.of.name for s in walk(statements) if isinstance(s, Flow) for a in s.value.atoms(Adj)}
    return set(recurrent) | read


def _value(statement):
    return getattr(statement, "value", sp.S.Zero)


def values_read(expr):
    """The names of the sequence values expr reads (not those of which it reads only the adjoint)."""
    return {seq.name for seq in values(expr)}


@dataclass(frozen=True)
class ForwardSteps:
    """The forward pass scheduled, before forward_pass hoists and fuses its loop (backends print the result)."""

    forced: list  # Assigns of the teacher-forced values, all steps at once
    before: list  # Assigns stacked before the loop (they read no state of the previous step)
    loop: list  # Assigns of the recursion, in order
    after: list  # Assigns stacked after the loop
    loop_names: set  # the names the loop assigns, and the live states
    computed: tuple  # the Seqs computed (not teacher-forced), in the model's order, values inlined


def forward_steps(model, cached):
    """The model's steps and outputs with the uncached values inlined, scheduled before, in and after the loop."""
    steps = [(seq, rhs, equation(seq(), rhs)) for seq, rhs in model.steps + model.outputs if seq not in model.forced]
    steps = optimize.inline_values(steps, cached)
    comments = {seq.name: comment for seq, _, comment in steps}
    live = {seq.name for seq in model.states if seq not in model.forced}
    before, loop, after = forward_schedule([(seq, rhs) for seq, rhs, _ in steps], live)

    def assign(pairs):
        return [Assign(seq(), rhs, comments[seq.name]) for seq, rhs in pairs]

    forced = [Assign(seq(), value, equation(seq(), value)) for seq, value in model.teacher_forcing]
    loop_names = {seq.name for seq, _ in loop} | live
    return ForwardSteps(forced, assign(before), assign(loop), assign(after), loop_names, tuple(s for s, _, _ in steps))


def forward_pass(model, cached):
    """The forward statements: teacher forcing and non-recurrent values stacked, the recursion in a loop."""
    steps = forward_steps(model, cached)
    inside, stacks, groups = fuse.products(steps.loop, steps.loop_names)
    members = {name for group in groups for name, _ in group.members}
    hoisted, inside = optimize.hoist(inside, steps.loop_names, members)
    inside = split_activations(inside, groups)
    inside, groups = fuse.activations(inside, groups)
    hoisted, more, groups = fuse.stacked(hoisted, groups)
    stacks = stacks + more
    inside = collect_products(inside)
    loop = [Loop(tuple(inside))] if inside else []
    statements = steps.forced + steps.before + hoisted + loop + steps.after
    seqs = [seq for seq, _ in model.teacher_forcing] + list(steps.computed)
    arrays = [
        Array(seq.name, seq.rows, Steps.FROM_ONE if seq.role == "output" else Steps.FROM_ZERO)
        for seq in seqs
        if seq.name not in members
    ]
    return Pass(tuple(statements), tuple(groups + arrays), tuple(stacks))


def backward_statements(derivation):
    """The adjoint statements, last step first: local terms stacked before the loop, the rest in it.

    An adjoint that only the next step feeds starts at zero."""
    order, parts, recurrent = backward_schedule(derivation)
    before, inside = [], []
    for seq in sorted(order, key=lambda s: s.name in recurrent):  # stable: non-recurrent first
        local, stepwise, nxt = parts[seq]
        name = text(Adj(seq()))
        if local:
            more = " + ..." if seq.name in recurrent else ""
            before.append(Assign(Adj(seq()), matrix_sum(local), f"{name} = {text(matrix_sum(local))}{more}"))
        elif not stepwise:
            before.append(Assign(Adj(seq()), sp.ZeroMatrix(seq.rows, 1), f"{name} = 0 + ..."))
    for seq in order:
        local, stepwise, nxt = parts[seq]
        name = text(Adj(seq()))
        if stepwise:
            kind, op = (Accumulate, "+=") if local else (Assign, "=")
            inside.append(kind(Adj(seq()), matrix_sum(stepwise), f"{name} {op} {text(matrix_sum(stepwise))}"))
        if nxt:
            inside.append(Guard((Flow(Adj(seq()), matrix_sum(nxt), f"{name} += {text(matrix_sum(nxt))}"),)))
    return before + ([Loop(tuple(inside), backward=True)] if inside else []), recurrent


def initial_gradients(derivation, recurrent):
    """dL/dS_0 for every state: what flows back from step 1."""
    model = derivation.model
    out = []
    for seq in model.states:
        value = _zeros_like(derivation.initial(seq), seq(0))
        flows = bool({a.of.name for a in value.atoms(Adj)} & set(recurrent))
        out.append(
            Initial(f"{seq.name}0", value, flows and seq not in model.forced, f"dL/d{seq.name}_0 = {text(value)}")
        )
    return out


def shape_of(matrix):
    """Size names of a parameter's shape: ('h', 'd'), or ('h',) for a vector."""
    rows, cols = matrix.shape
    return (str(rows),) if cols == 1 else (str(rows), str(cols))
