"""Turn a model's derivation into the statements of its generated module: an ir.Program.

derived(model) is the Program as the derivation gives it: the forward steps in one loop, the adjoints' local
terms before their loop and the rest in it, the gradients as sums over time. Every pass is Program -> Program;
SHARED_PASSES make it fast for every backend (only the recursions loop over time: input projections, outputs,
local adjoint terms and parameter gradients become one stacked statement over all steps; what backward never
reads is not stored; loop-invariant terms leave the loop; gate products that share an operand become one
product), then each backend's own list (NUMPY_PASSES, TORCH_PASSES, JAX_PASSES) rewrites it for that backend.
"""

import functools

import sympy as sp

from bptt.codegen.ir import Accumulate, Array, Assign, Flow, Guard, Initial, Loop, Pass, Program, Steps, ZerosLike
from bptt.codegen.passes import forward_mode
from bptt.codegen.passes.checkpoint import checkpointed
from bptt.codegen.passes.collapse import collapsed_chains
from bptt.codegen.passes.collect import collected_products
from bptt.codegen.passes.fresh import fresh_returns
from bptt.codegen.passes.fuse import fused_activations, fused_products, stacked_inputs
from bptt.codegen.passes.fuse_backward import fused_flows, fused_gradients, stacked_window
from bptt.codegen.passes.halve import halved_sigmoids
from bptt.codegen.passes.hoist import hoisted_block_slopes, hoisted_factors, hoisted_slopes, hoisted_terms
from bptt.codegen.passes.inline import cached_values, inlined_adjoints, inlined_values
from bptt.codegen.passes.loops import backward_schedule, scheduled_backward, scheduled_forward
from bptt.codegen.passes.norms import centred_norms
from bptt.codegen.passes.scanned import scanned_values
from bptt.codegen.passes.slices import activated_slices
from bptt.codegen.passes.slopes import named_slopes
from bptt.codegen.passes.split import split_activations
from bptt.codegen.passes.storage import adjoint_arrays
from bptt.codegen.passes.window import aged_adjoints, plain_window
from bptt.derive.adjoint import check_products
from bptt.derive.atoms import atoms
from bptt.derive.bptt import derive
from bptt.derive.direction import forward_only
from bptt.derive.distribute import distributed_model
from bptt.derive.nodes import Adj, matrix_sum
from bptt.derive.norm_adjoint import compact
from bptt.derive.sweep_models import side_gradients
from bptt.derive.text import equation, text


@functools.cache  # a backend prints the same statements of a model every time
def build(model, passes=()):
    """The model's Program: shared(model), rewritten by `passes` (a backend's own list below)."""
    return rewritten(shared(model), passes)


def rewritten(program, passes):
    """program rewritten by each pass in turn."""
    return functools.reduce(lambda done, rewrite: rewrite(done), passes, program)


@functools.cache  # every backend starts from the same statements of a model
def shared(model):
    """The Program every backend's passes start from: derived(model) rewritten by SHARED_PASSES."""
    return rewritten(derived(model), SHARED_PASSES)


# The passes every backend shares, in order. The backward statements first name the slopes they share and are
# kept plain for the window pass; what backward reads decides what forward stores.
SHARED_PASSES = (
    named_slopes,  # slopes.py: dL/d(pre-activation) named where every read of an adjoint is after one diag factor
    plain_window,  # window.py: the window pass prints the adjoints as they are here
    cached_values,  # inline.py: what forward keeps for backward (Program.cache)
    inlined_values,  # inline.py: an uncached intermediate read once, inlined into its reader
    scheduled_forward,  # loops.py: only the recursion loops; the rest before or after it, all steps at once
    fused_products,  # fuse.py: gate products that share an operand, one product with the weights stacked
    hoisted_terms,  # hoist.py: the terms of a loop statement that read nothing of the loop, before it
    split_activations,  # split.py: a gate's own terms added before its activation
    fused_activations,  # fuse.py: one activation over neighbouring gates
    stacked_inputs,  # fuse.py: the hoisted input projections of neighbouring gates, one product
    collected_products,  # collect.py: a step's products collected by a common factor
    inlined_adjoints,  # inline.py: an adjoint read once in its own step, inlined into its reader
    fused_flows,  # fuse_backward.py: the gates' flows one product with the stacked weights
    fused_gradients,  # fuse_backward.py: the gradients of neighbouring gates one product
    hoisted_factors,  # hoist.py: the slopes of the activations, all steps at once before the loop
    collapsed_chains,  # collapse.py: chains of diag factors through one adjoint collapsed
    hoisted_slopes,  # hoist.py: the slopes that collapse summed, before the loop
    adjoint_arrays,  # storage.py: the adjoints' arrays, one shared where it can be
    fresh_returns,  # fresh.py: returned gradients share no memory
    checkpointed,  # checkpoint.py: the boundaries between segments of steps, and what the schedule weighs
    aged_adjoints,  # window.py: the adjoints that carry an age axis in a window
)

# Each backend's own passes, after the shared ones; its render.py builds with its list. Halved sigmoids pay in
# NumPy's in-place loops (a sigmoid is several calls there) and, measured, in torch's LSTM (not clearly in its
# GRU); not in JAX's functional code. JAX's backward prints the window pass, so its flows through the gates'
# weights are stacked there.
NUMPY_PASSES = (halved_sigmoids, activated_slices, hoisted_block_slopes, scheduled_backward, centred_norms)
TORCH_PASSES = (halved_sigmoids,)
JAX_PASSES = (stacked_window, scanned_values)


@functools.cache  # the passes' tests start from it too
def derived(model):
    """The model's Program before any pass: the teacher-forced values, then every step and output in one
    forward loop; the adjoint statements (backward_statements); dL/dS_0 and the gradients as the derivation
    gives them; forward mode. The window pass, the gradient products and the checkpoints are still empty.
    The code multiplies by one matrix at a time: the model is derived with its products distributed."""
    forward_only(model, "the generated code")
    check_products(model)  # as the derivation of the model as written refuses them
    model = distributed_model(model)
    derivation = compact(derive(model, named="all", loss=model.concrete_loss()))  # a norm's adjoint, O(n)
    statements, recurrent = backward_statements(derivation)
    returns = tuple(
        (p.name, _zeros_like(derivation.param_gradient(p), p), f"dL/d{p.name} = {text(derivation.param_gradient(p))}")
        for p in model.params
    )
    returns += tuple(
        (seq.name, value, f"dL/d{seq.name}_t = {text(value)}")
        for seq, value in side_gradients(model)
        if not isinstance(value, sp.ZeroMatrix)  # nothing flows back into it: the runtime hands nothing back
    )
    return Program(
        model=model,
        cache=(model.inputs[0].name,),
        forward=forward_statements(model),
        adjoints=Pass(tuple(statements)),
        window=Pass(()),
        initial=tuple(initial_gradients(derivation, recurrent)),
        window_initial=(),
        gradients=Pass(()),
        returns=returns,
        owned_returns=(),
        recurrent=tuple(sorted(recurrent)),
        forward_mode=Pass(forward_mode.statements(model)),
        checkpoints=None,
    )


def _zeros_like(value, like):
    """A zero gradient as zeros shaped like the parameter or initial state (ir.ZerosLike); others as they are."""
    return ZerosLike(like) if isinstance(value, sp.ZeroMatrix) else value


def forward_statements(model):
    """The teacher-forced values, then every step and output in one loop; an array per sequence value."""
    forced = [Assign(seq(), value, equation(seq(), value)) for seq, value in model.teacher_forcing]
    steps = [
        Assign(seq(), rhs, equation(seq(), rhs)) for seq, rhs in model.steps + model.outputs if seq not in model.forced
    ]
    seqs = [seq for seq, _ in model.teacher_forcing] + [s.target for s in steps]
    arrays = tuple(
        Array(seq.name, seq.rows, Steps.FROM_ONE if seq.role == "output" else Steps.FROM_ZERO) for seq in seqs
    )
    return Pass((*forced, Loop(tuple(steps))), arrays)


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
        flows = bool({a.of.name for a in atoms(value, Adj)} & set(recurrent))
        out.append(
            Initial(f"{seq.name}0", value, flows and seq not in model.forced, f"dL/d{seq.name}_0 = {text(value)}")
        )
    return out


@functools.lru_cache(maxsize=1024)  # str() of a SymPy size makes a printer; the same parameters are asked again
def shape_of(matrix):
    """Size names of a parameter's shape: ('h', 'd'), or ('h',) for a vector."""
    rows, cols = matrix.shape
    return (str(rows),) if cols == 1 else (str(rows), str(cols))
