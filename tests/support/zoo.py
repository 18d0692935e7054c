"""The zoo models a feature supports. Every zoo model runs full BPTT and BPTT in bounded memory (checkpoints=), with
lengths= too, in every backend (EVERY_MODEL's features); the features below refuse a model with reverse-time states
(bptt.derive.direction.reverse_states: a state read at t+1), so they run the zoo's models without them. Test files
iterate over `supporting(feature, ...)`, so that a model added to the zoo is tested by each feature it has;
tests/app/test_zoo_refusals.py tests each refusal."""

from bptt.derive.direction import reverse_states
from bptt.derive.models import load, names

EVERY = tuple(names())
WITH_REVERSE_STATES = tuple(name for name in EVERY if reverse_states(load(name)))
EVERY_MODEL = ("full_bptt", "checkpoints")  # features every zoo model has

REFUSED = {  # refused in one line (tests/app/test_zoo_refusals.py)
    "truncate": "truncate=, and bptt check --truncate",
    "truncated_checkpoints": "truncate= with checkpoints=",
    "forward_mode_grads": "forward_mode_grads",
    "apply": "JAX's apply",
    "standalone": "bptt codegen --standalone",
    "bench": "bptt bench",
    "analyze": "bptt analyze",
    "exercises": "bptt exercises",
}
LACKING = {  # what a model with reverse-time states does not have, or its module does not do yet
    "causal": "outputs that read no later input",
    "streams": "a stream continued from the final states",
    "one_program": "one forward-only program of the whole model (the codegen IR's _PASSES, helpers, seams, calls)",
    "mirror": "its mirror in reverse time is a forward-only model's",
    "cache_checks": "backward checks a corrupted cache (the sweeps runtime does not yet)",
    "value_checks": "a bad value's message names it as a forward-only module's does (the sweeps runtime's differ)",
}
FORWARD_ONLY_FEATURES = {**REFUSED, **LACKING}

# The zoo's layer-normalised model and what it does not do yet (the stop's note lists these as open gaps): the
# tests of these features run the rest of the zoo.
WITH_NORMS = ("lstm-layernorm",)
NORM_GAPS = {
    "analyze": "bptt analyze stops at the closed form's A_k, which a norm's adjoint does not have",
    "wide_sets": "bptt check's wide parameter sets do not size a 4*h sequence",
    "planted_check": "bptt check's sweep misses a planted error of 1e-6 where sigma is small",
    "jax_vmap": "the JAX module's custom_vjp under vmap",
    "allocations": "torch's step functions allocate per step",
    "value_checks": "a bad parameter's message names xs first",
}


def supporting(*features):
    """The zoo's names (sorted) of the models that run every one of `features`: all for EVERY_MODEL's, else those
    without reverse-time states."""
    unknown = set(features) - set(FORWARD_ONLY_FEATURES) - set(EVERY_MODEL)
    if unknown:
        raise KeyError(f"unknown features {sorted(unknown)}")
    if set(features) <= set(EVERY_MODEL):
        return EVERY
    return tuple(name for name in EVERY if name not in WITH_REVERSE_STATES)
