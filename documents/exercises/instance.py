"""One exercise: a model at sizes 1 or 2, T = 2 or 3, with small rational parameters and inputs drawn from a seed.

An activation whose value would be irrational (tanh, the sigmoid, exp, softmax) is given as data: the simple
rational nearest its true value, in its range, so that everything else is exact arithmetic.
"""

import random
from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from bptt.derive.elementwise import Apply, lookup
from bptt.derive.explicit import evaluate
from bptt.derive.nodes import GenericLoss, Softmax, SoftmaxCrossEntropy, t

PARAMETER_VALUES = tuple(sp.Rational(v) for v in ("-1", "-1/2", "1/2", "1", "2"))
INPUT_VALUES = tuple(sp.Rational(v) for v in ("-1", "1", "2"))
TARGET_VALUES = tuple(sp.Rational(v) for v in ("-1", "0", "1"))
INITIAL_VALUES = tuple(sp.Rational(v) for v in ("-1/2", "0", "1/2"))
MOST_ENTRIES = 12  # parameter entries a student works with by hand, at most (a gated cell has more at size 1)
DENOMINATORS = (2, 4)  # a given activation value is a fraction p/q with one of these q: halves and quarters
# The open range of each function that takes irrational values at rationals; softmax's entries lie in (0, 1).
RANGES = {"tanh": (-1, 1), "sigmoid": (0, 1), "exp": (0, None)}


class NotExact(ValueError):
    """A model whose answers cannot be exact numbers: an activation whose values cannot be given as simple
    rationals (gelu, softplus, ...), or a loss left unspecified."""


@dataclass
class Instance:
    """The numbers of one exercise. env maps parameters, initial states, inputs and targets (and, once
    forward() ran, every value of the forward pass) to explicit matrices; given: the activation values
    stated as data, {node at step k: matrix}, in the order the forward pass meets them."""

    model: object
    seed: int
    steps: int
    sizes: dict  # size symbol -> int
    tau: int  # chunk length of the truncated question
    data: dict  # parameters, initial states, inputs and targets -> explicit matrices (or label ints)
    given: dict
    env: dict
    denominators: tuple = DENOMINATORS  # of the given activation values

    def numbers(self):
        """Every number of the problem, as a hashable tuple: two instances with the same numbers are the same."""
        shown = [
            (str(key), tuple(value) if isinstance(value, sp.MatrixBase) else value) for key, value in self.data.items()
        ]
        return (self.steps, self.tau, tuple(sorted(self.sizes.items(), key=str)), tuple(shown))


def attempts(model, seed):
    """The exercises of this seed, one after another from one stream of random numbers: the first is the
    seed's, unless its answers come out degenerate (a zero gradient asked for), when the next is taken."""
    if isinstance(model.concrete_loss(), GenericLoss):
        raise NotExact(
            "its loss is left unspecified (GenericLoss), so no answer has a number; give it a concrete loss such as "
            "SquaredError (as code_loss, if the derivation should keep l general)"
        )
    rng = random.Random(f"{model.name}:{seed}")
    many = _activations_per_step(model) > 2  # a gated cell: two steps, and given values in halves
    while True:
        found = draw(model, seed, rng, many)
        forward(found)
        yield found


def draw(model, seed, rng, gated=False):
    """An instance's numbers, drawn from rng (its forward pass not run yet)."""
    sizes = _sizes(model, rng)
    steps = 2 if gated else rng.choice((2, 3))
    tau = 1 if steps == 2 else rng.choice((1, 2))
    data = {}
    for param in model.params:
        data[param] = _matrix(param.shape, sizes, rng, PARAMETER_VALUES)
    for state in model.states:
        data[state(0)] = _matrix((state.rows, 1), sizes, rng, INITIAL_VALUES)
    for seq in _data_sequences(model):
        values = INPUT_VALUES if seq.role == "input" else TARGET_VALUES
        for k in range(1, steps + 1):
            label = seq.role == "label"
            data[seq(k)] = rng.randrange(_int(seq.rows, sizes)) if label else _matrix((seq.rows, 1), sizes, rng, values)
    denominators = DENOMINATORS[:1] if gated else DENOMINATORS
    return Instance(model, seed, steps, sizes, tau, data, {}, {}, denominators)


def _activations_per_step(model):
    return sum(isinstance(node, (Apply, Softmax)) for _, rhs in model.steps for node in sp.preorder_traversal(rhs))


def _int(dim, sizes):
    return int(sp.sympify(dim).xreplace(sizes))


def _sizes(model, rng):
    """Each size 1 or 2 (a softmax's classes and a label's values 2), shrunk to 1 from the largest while the
    parameters have too many entries to do by hand."""
    classes = {model.loss.prediction.rows} if isinstance(model.loss, SoftmaxCrossEntropy) else set()
    classes |= {seq.rows for seq in model.sequences() if seq.role == "label"}  # one class would be no choice
    sizes = {size: 2 if size in classes else rng.choice((1, 2)) for size in model.sizes}
    while _entries(model, sizes) > MOST_ENTRIES:
        larger = [size for size in model.sizes if sizes[size] > 1 and size not in classes]
        if not larger:
            break
        sizes[max(larger, key=lambda size: _entries(model, {**sizes, size: 1}) * -1)] = 1
    return sizes


def _entries(model, sizes):
    return sum(_int(p.shape[0], sizes) * _int(p.shape[1], sizes) for p in model.params)


def _matrix(shape, sizes, rng, values):
    rows, cols = (_int(n, sizes) for n in shape)
    return sp.ImmutableMatrix(rows, cols, [rng.choice(values) for _ in range(rows * cols)])


def _data_sequences(model):
    """The input, then the targets or labels the loss and teacher forcing read, in the model's order."""
    others = [seq for seq in model.sequences() if seq.role in ("target", "label") and seq not in model.inputs]
    return [*model.inputs, *others]


def forward(found):
    """Fill found.env with the forward pass, step by step; each irrational activation value is chosen and kept
    in found.given."""
    model, env = found.model, found.env
    env.update(found.data)
    env.update({size: n for size, n in found.sizes.items()})
    forced = model.forced
    for k in range(1, found.steps + 1):
        for seq, rhs in model.assignments:
            rhs_k = forced.get(seq, rhs).subs(t, k)
            _give(found, rhs_k)
            env[seq(k)] = evaluate(rhs_k, env, found.steps)
        loss = model.concrete_loss().subs(t, k)
        if isinstance(loss, SoftmaxCrossEntropy):
            _give(found, Softmax(loss.prediction))


def _give(found, expr):
    """Put the value of every activation in expr (innermost first) into found.env; a value that is not rational
    is replaced by the nearest simple rational in the function's range, recorded in found.given."""
    for node in sp.postorder_traversal(expr):
        if not isinstance(node, (Apply, Softmax)) or node in found.env:
            continue
        argument = evaluate(node.arg, found.env, found.steps)
        exact = _exact(node, argument)
        if all(value.is_Rational for value in exact):
            found.env[node] = exact
            continue
        chosen = _softmax_given(exact, found.denominators) if isinstance(node, Softmax) else _given(node, exact, found)
        found.env[node] = found.given[node] = chosen


def _exact(node, argument):
    if isinstance(node, Softmax):
        exps = argument.applyfunc(sp.exp)
        return sp.ImmutableMatrix(exps / sum(exps))
    return sp.ImmutableMatrix(argument.applyfunc(lookup(node.function).scalar))


def _given(node, exact, found):
    function = node.function
    if function not in RANGES:
        raise NotExact(
            f"the activation {function} takes irrational values that an exercise cannot give as simple fractions "
            f"(exercises know {', '.join(sorted(RANGES))}, and functions exact at rationals such as relu)"
        )
    low, high = RANGES[function]
    return exact.applyfunc(lambda value: _nearest(float(value), low, high, found.denominators))


def _nearest(value, low, high, denominators):
    """The fraction p/q, q in denominators, nearest value strictly inside (low, high); the simpler on a tie."""
    best = None
    for q in denominators:
        for p in (int(value * q) - 1, int(value * q), int(value * q) + 1):
            candidate = Fraction(p, q)
            if (low is not None and candidate <= low) or (high is not None and candidate >= high):
                continue
            key = (abs(candidate - Fraction(value)), q)
            best = min(best, (key, candidate)) if best else (key, candidate)
    return sp.Rational(best[1].numerator, best[1].denominator)


def _softmax_given(exact, denominators):
    """Probabilities near the softmax's: each entry but the last the nearest fraction in (0, 1), the last the rest
    (kept inside (0, 1) by lowering the largest of the others)."""
    rows = len(exact)
    chosen = [_nearest(float(value), 0, 1, denominators) for value in list(exact)[:-1]]
    while sum(chosen) >= 1:
        largest = max(range(rows - 1), key=lambda n: chosen[n])
        chosen[largest] -= sp.Rational(1, denominators[-1])
    return sp.ImmutableMatrix([*chosen, 1 - sum(chosen)])
