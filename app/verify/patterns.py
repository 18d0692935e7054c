"""Randomized truncation's exact expectation, which `bptt check` compares with full BPTT: the gradient of every keep
pattern weighted by its probability, over all 2**T patterns (2**(G*T) for a module's G groups of steps, each drawing
its own), each pattern fed to the module through a Generator that hands it out (PatternRng, GroupGenerators)."""

import itertools

import numpy as np

from bptt.app.verify.reverse_loss import groups_of
from bptt.runtime.options import RANDOM, Truncation

# The bit generator of the Generators below, which never draw from it (a new one each costs 0.1 ms).
UNDRAWN = np.random.PCG64(0)


class PatternRng(np.random.Generator):
    """A Generator whose random(T) gives one keep pattern: 0.0 where kept (below any pi), 1.0 where dropped."""

    def __init__(self, kept):
        super().__init__(UNDRAWN)
        self.kept = np.asarray(kept, dtype=bool)

    def random(self, size=None, dtype=np.float64, out=None):
        return np.where(self.kept, 0.0, 1.0)


class GroupGenerators(np.random.Generator):
    """The rng of a module of groups of steps that hands each group the given generator: the runtime seeds group g's
    generator with np.random.default_rng(seed), for the g-th seed of rng.integers(...), and default_rng returns a
    Generator given as its seed unaltered."""

    def __init__(self, generators):
        super().__init__(UNDRAWN)
        self.generators = list(generators)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        return self.generators


def group_count(module):
    """How many groups of steps draw random truncation's weights: those of a module with reverse-time states, or 1."""
    composed = groups_of(module)
    return 1 if composed is None else len(composed.sweeps)


def expected_gradient(instance, pi, dtype="float64"):
    """The exact expectation of the randomized-truncation gradient: the sum over all 2**T keep
    patterns (xi = 1/pi kept, with probability pi; 0 dropped) of its gradient times its probability; over all
    2**(G*T) of a module's G groups of steps, each drawing its own."""
    groups, truncate = group_count(instance.module), Truncation(RANDOM, pi)
    steps, total, grads_of = len(instance.xs) * groups, {}, None
    for kept in itertools.product((True, False), repeat=steps):
        probability = pi ** sum(kept) * (1 - pi) ** (steps - sum(kept))
        if probability > 0:
            parts = [PatternRng(part) for part in np.split(np.asarray(kept), groups)]
            rng = parts[0] if groups == 1 else GroupGenerators(parts)
            if grads_of is None:
                grads = instance.grads(dtype, truncate, rng)
                grads_of = one_forward_pass(instance, dtype, (truncate, rng, grads))
            else:
                grads = grads_of(truncate, rng)
            for name, grad in grads.items():
                total[name] = total.get(name, 0.0) + probability * grad.astype(np.float64)
    return total


def one_forward_pass(instance, dtype, known):
    """grads_of(truncate, rng): the instance's gradients in dtype, as its module's loss_and_grads gives them, from
    the backward passes of one forward pass (a NumPy module: its backward of output_gradient's cache and dL/doutputs;
    of groups of steps: loss_and_backward), if that gives known = (truncate, rng, loss_and_grads's gradients)
    exactly; else loss_and_grads's own, one forward pass each."""

    def plain(truncate, rng):
        return instance.grads(dtype, truncate, rng)

    module = instance.module
    composed, passes = getattr(module, "_SWEEPS", None), getattr(module, "_PASSES", None)
    params, xs, ys, initial = instance.cast(dtype)
    if composed is not None and hasattr(composed, "loss_and_backward"):
        states = tuple(initial.get(name) for name in composed.spec.states)
        grads_of = composed.loss_and_backward(params, xs, ys, states, instance.lengths)[1]
    elif composed is None and hasattr(passes, "output_gradient"):
        states = tuple(initial.get(name) for name in passes.spec.states)
        _, d_outputs, cache = passes.output_gradient(params, xs, ys, states, instance.lengths)[:3]

        def grads_of(truncate, rng):
            return module.backward(params, cache, d_outputs, truncate=truncate, rng=rng, check_finite=False)

    else:
        return plain
    truncate, rng, expected = known
    found = grads_of(truncate, rng)
    same = expected.keys() == found.keys() and all(np.array_equal(expected[k], found[k]) for k in expected)
    return grads_of if same else plain
