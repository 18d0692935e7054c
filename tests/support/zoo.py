"""The zoo models a feature supports. Every zoo model has EVERY_MODEL's features (full and truncated BPTT, BPTT in
bounded memory, with lengths= too, in every backend; ...); the features below refuse a model with reverse-time states
(reverse_states: a state read at t+1), so they run the zoo's models without them. Test files iterate over
`supporting(feature, ...)`, so that a model added to the zoo is tested by each feature it has;
tests/app/test_zoo_refusals.py tests each refusal."""

import sympy as sp

from bptt.derive.direction import reverse_states
from bptt.derive.models import load, names
from bptt.derive.reductions import Reduce

EVERY = tuple(names())
WITH_REVERSE_STATES = tuple(name for name in EVERY if reverse_states(load(name)))


def reduces(model):
    """Whether a model's cell reduces over the units of a vector (a norm's mean and deviation)."""
    return any(isinstance(node, Reduce) for _, rhs in model.steps for node in sp.preorder_traversal(rhs))


REDUCING = tuple(name for name in EVERY if reduces(load(name)))  # lstm-layernorm: its norms' means

REFUSED = {  # refused in one line (tests/app/test_zoo_refusals.py)
    "truncated_checkpoints": "truncate= with checkpoints=",
    "forward_mode_grads": "forward_mode_grads",
    "bench": "bptt bench",
    "analyze": "bptt analyze",
    "exercises": "bptt exercises",
}
LACKING = {  # what a model with reverse-time states does not have, or its module does not do yet
    "causal": "outputs that read no later input",
    "one_program": "one forward-only program of the whole model (the codegen IR's _PASSES, helpers, seams, calls)",
    "mirror": "its mirror in reverse time is a forward-only model's",
}
FORWARD_ONLY_FEATURES = {**REFUSED, **LACKING}
EVERY_MODEL = (  # what every zoo model has, models with reverse-time states too
    "full_bptt",  # full BPTT, with lengths= too
    "truncate",  # truncate=: window, chunk and random truncation, each recursion in its own direction
    "checkpoints",  # checkpoints=: BPTT in bounded memory, the budget shared among the groups
    "cache_checks",  # backward refuses a corrupted cache in one line naming what is wrong
    "value_checks",  # a bad value's message names it in the user's notation
    "standalone",  # bptt codegen --standalone: a module that imports nothing of bptt
    "apply",  # JAX's apply: a jax.custom_vjp whose backward is the derived BPTT, under jit, grad and vmap
    "streams",  # a stream continued from the final states (a reverse state's: into the steps before)
)


def supporting(*features):
    """The zoo's names (sorted) of the models that run every one of `features`: all for those every model has
    (EVERY_MODEL), else those without reverse-time states."""
    unknown = set(features) - set(FORWARD_ONLY_FEATURES) - set(EVERY_MODEL)
    if unknown:
        raise KeyError(f"unknown features {sorted(unknown)}")
    if set(features) <= set(EVERY_MODEL):
        return EVERY
    return tuple(name for name in EVERY if name not in WITH_REVERSE_STATES)
