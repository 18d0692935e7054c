"""Check a generated module's gradients against finite differences of its own loss.

Each checked entry's derivative comes from Ridders' method (app/verify/ridders.py): central
differences at steps shrinking from one scaled to the entry, extrapolated to a zero step,
with an estimate of their own error; where the module's cells allow it (app/verify/sets.py), the
losses of many entries' differences come from one forward pass of their parameter sets side
by side (else those of the initial states', vector parameters' and the inputs' and outputs' matrices' entries, and of
the matrices the maths multiply by np.matmul, from one of their sets along the batch: batched.py). Entry a (analytic,
in the checked dtype) passes against n (numeric, float64) when |a - n| <= tolerance * max(|a|, |n|, FLOOR * largest)
+ MARGIN * estimate, largest being the array's largest |gradient| (of an array whose gradient is zero, that of the
array with the largest).

What it resolves: a relative error of the tolerance (1e-7 in float64, 1e-3 in float32) in
every checked entry down to FLOOR of its array's largest; smaller entries only to that
absolute level. What it cannot: a derivative below the loss's rounding noise (about
eps |loss| / step; the estimate then says so and the entry is only bounded), a loss that is
not smooth at the point (the differences never converge; their spread becomes the estimate),
and entries it does not sample (at most max_entries per array). A forward pass that overflows
is refused (NonFiniteForward) rather than differenced.

Randomized truncation is checked exactly: the expectation over every keep pattern, each
weighted by its probability, against full BPTT, for T up to RANDOM_STEPS = 12 (TooManyPatterns beyond)."""

import importlib
import importlib.util
import math
import types
from dataclasses import dataclass

import numpy as np

from bptt.app.verify.batched import Batched
from bptt.app.verify.patterns import expected_gradient, group_count
from bptt.app.verify.problem import problem
from bptt.app.verify.ridders import STEPS, ladder, points, ridders, start
from bptt.app.verify.sets import Layout
from bptt.codegen.backends import BACKENDS, module_filename, reference
from bptt.runtime.options import Truncation

TOLERANCE = {"float64": 1e-7, "float32": 1e-3}
FLOOR = 1e-3  # entries below this fraction of their array's largest are measured against it
MARGIN = 10  # times the finite differences' error estimate, a heuristic (seen up to 5 times optimistic)
MAX_ENTRIES = 40  # finite differences on at most this many entries per array
EXACT = {"float64": 1e-12, "float32": 1e-5}  # the expectation over keep patterns against full BPTT
RANDOM_STEPS = 12  # randomized truncation is checked over all 2**T keep patterns, for T up to this


class TooManyPatterns(ValueError):
    """Randomized truncation at a T whose 2**T keep patterns are too many to enumerate."""


def require_enumerable(steps, truncate, groups=1):
    """Raise TooManyPatterns if truncate is random:PI and T = steps is over RANDOM_STEPS (over RANDOM_STEPS // groups
    for a module of groups of steps, each drawing its own T weights); compares T itself, so that no T, however
    long, costs time or memory (2**T is never computed beyond)."""
    if not Truncation.of(truncate).randomized or steps * groups <= RANDOM_STEPS:
        return
    if groups > 1:
        raise TooManyPatterns(
            f"randomized truncation is checked exactly, over all 2**(G*T) keep patterns of the model's G={groups} "
            f"groups of steps (each draws its own), for G*T <= {RANDOM_STEPS}: T={steps} is too long, "
            f"T <= {RANDOM_STEPS // groups} is checked"
        )
    raise TooManyPatterns(
        f"randomized truncation is checked exactly, over all 2**T keep patterns, for T <= {RANDOM_STEPS} "
        f"(at most {2**RANDOM_STEPS}): T={steps} is too long; a sampled mean has no honest bound "
        "when a weight can reach 1/pi**T"
    )


@dataclass(frozen=True)
class Row:
    """One array's verdict: the largest relative difference, the finite differences'
    largest relative error estimate, and the worst entry's difference / allowance."""

    name: str
    error: float
    estimate: float
    tolerance: float
    ratio: float

    @property
    def ok(self):
        return self.ratio <= 1


def load_module(model, from_zoo, backend=None):
    """generated/<model>.py (or <model>_<backend>.py) for a zoo model, or the module rendered in memory for a
    user's model."""
    backend = backend or reference().name
    name = module_filename(model, backend)[:-3]
    if from_zoo:
        try:
            return importlib.import_module(f"bptt.generated.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"bptt.generated.{name}":
                raise  # the module is there, its framework is not
            raise _not_generated(model, name, backend) from None
    module = types.ModuleType(name)
    source = BACKENDS[backend].module_source(model)
    exec(compile(source, f"<bptt {model.name} {backend}>", "exec"), module.__dict__)
    return module


def require_module(model, from_zoo, backend):
    """load_module's errors without running the module (nor importing its framework, seconds for torch or JAX): a
    zoo model's generated file is there; a user's model renders (or is refused in one line)."""
    name = module_filename(model, backend)[:-3]
    if not from_zoo:
        BACKENDS[backend].module_source(model)
    elif importlib.util.find_spec(f"bptt.generated.{name}") is None:
        raise _not_generated(model, name, backend)


def _not_generated(model, name, backend):
    flag = "" if backend == reference().name else f" --backend {backend}"
    return FileNotFoundError(f"generated/{name}.py does not exist; run `bptt codegen {model.name}{flag}`")


# Fourth-order central differences (the adjoint tests' Jacobian-vector products):
# f'(x) = sum of weight * f(x + step e), over 12 e, + O(e^4).
STENCIL = ((2, -1), (1, 8), (-1, -8), (-2, 1))


def numeric_gradient(loss, array, entries, enough=None):
    """Ridders' derivatives of loss() along the given entries of array, and their error
    estimates (two arrays); enough[n] (default 0) ends the ladder of entry n early."""
    enough = np.zeros(len(entries)) if enough is None else enough
    pairs = [ridders(loss, array, index, limit) for index, limit in zip(entries, enough, strict=True)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def compare(name, analytic, numeric, estimates, tolerance, largest):
    """Row of an array: entry n passes if |a - n| <= tolerance * scale + MARGIN * estimate, where
    scale = max(|a|, |n|, FLOOR * largest) and largest is the array's largest |gradient|."""
    return compare_arrays([name], [len(analytic)], analytic, numeric, estimates, tolerance, [largest])[0]


def compare_arrays(names, counts, analytic, numeric, estimates, tolerance, largest):
    """compare's Row of each named array, at once: its entries are the next counts[k] (at least 1) of analytic,
    numeric and estimates; largest, one per array (one of zeros is measured against the largest of them)."""
    if min(counts) < 1:
        raise ValueError("every array needs at least one entry to compare")
    starts = np.cumsum([0, *counts[:-1]])
    most, largest = np.maximum.reduceat(np.abs(numeric), starts), np.asarray(largest, np.float64)
    either = np.where(most > largest, most, largest)  # max(largest, most), as Python's
    floor = np.repeat(FLOOR * np.where(largest > 0, either, either.max()), counts)  # zeros: against the largest
    scale = np.maximum(np.maximum(np.abs(analytic), np.abs(numeric)), floor)
    scale = np.where(scale > 0, scale, np.finfo(float).tiny)
    error, estimate = np.abs(analytic - numeric) / scale, estimates / scale
    ratio = error / (tolerance + MARGIN * estimate)
    worst = [np.maximum.reduceat(values, starts).tolist() for values in (error, estimate, ratio)]
    return [Row(name, e, s, tolerance, r) for name, e, s, r in zip(names, *worst, strict=True)]


def negligible(analytic, largest, tolerance):
    """Per entry, an error estimate negligible in compare's allowance: Ridders' ladder may stop there."""
    return 0.01 * tolerance * np.maximum(np.abs(analytic), FLOOR * largest)


def sample_entries(shape, count, rng):
    """At most count indices of an array of this shape, in order, drawn by rng."""
    drawn = np.sort(rng.permutation(math.prod(shape))[:count]).tolist()
    return [_unravelled(flat, shape) for flat in drawn]


def _unravelled(flat, shape):
    """np.unravel_index(flat, shape) in Python ints: the index of entry flat of an array of this shape, C order."""
    index = []
    for size in reversed(shape):
        flat, place = divmod(flat, size)
        index.append(place)
    return tuple(reversed(index))


def check(
    module, steps=5, batch=3, seed=0, dtype="float64", sizes=None, truncate=None, max_entries=MAX_ENTRIES, lengths=None
):
    """One Row per parameter and initial state: the analytic gradient (computed in dtype)
    against Ridders' derivatives of the float64 (truncated) loss on at most max_entries
    entries of each array; for randomized truncation, the exact expectation against full BPTT.
    lengths (a Lengths): a right-padded batch's, whose loss sums each sequence's own steps only.
    Raises NonFiniteForward if the forward pass overflows, TooManyPatterns if truncate is random:PI
    and steps is over RANDOM_STEPS."""
    require_enumerable(steps, truncate, group_count(module))
    truncation = Truncation.of(truncate)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # reported (require_finite), not warned
        instance = problem(module, steps, batch, seed, sizes, lengths)
        for kind in dict.fromkeys((dtype, "float64")):
            instance.require_finite(kind)
        if truncation.randomized:
            return check_unbiased(instance, truncation.value, dtype)
        return check_gradients(instance, dtype, truncate, np.random.default_rng(seed + 1), max_entries)


def check_gradients(instance, dtype, truncate, chooser, max_entries):
    """Rows of the analytic gradient against Ridders' derivatives on entries drawn by chooser."""
    grads, tolerance = instance.grads(dtype, truncate), TOLERANCE[dtype]
    arrays = {**instance.params, **instance.initial}
    drawn = {name: sample_entries(array.shape, max_entries, chooser) for name, array in arrays.items()}
    entries, counts = [(name, index) for name in arrays for index in drawn[name]], [len(drawn[name]) for name in arrays]
    analytic = np.array([grads[name][index] for name, index in entries], np.float64)
    largest = np.array([float(np.abs(grads[name]).max()) for name in arrays])
    enough = negligible(analytic, np.repeat(largest, counts), tolerance)
    requests = [(name, index, limit) for (name, index), limit in zip(entries, enough, strict=True)]
    numeric, estimates = np.array(differences(instance, truncate, requests)).reshape(-1, 2).T
    return compare_arrays(list(arrays), counts, analytic, numeric, estimates, tolerance, largest)


# In step, each ladder's next AHEAD differences are evaluated together (FIRST at first: a ladder needs
# at least four before it can converge); a ladder that stops earlier leaves some unused.
FIRST, AHEAD = 4, 2


def differences(instance, truncate, requests):
    """Ridders' (derivative, error estimate) of instance.loss(truncate) along each requested
    (array name, index, enough). Where a Layout keeps the module's parameter sets apart, the
    ladders run in step, their next differences' losses from forward passes of Layout.sets
    sets at once; otherwise one entry after another, but for the entries of the arrays a Batched layout varies
    (initial states, vectors, matrices of a widened dimension), in step if it keeps their sets apart."""
    arrays = {**instance.params, **instance.initial}
    layout = Layout.find(instance, truncate)
    if layout is not None:
        return in_step(instance, truncate, requests, layout)
    found = {}
    for batched in Batched.find(instance, truncate):
        varied = set(batched.varies(instance))
        apart = [n for n, (name, _, _) in enumerate(requests) if name in varied and n not in found]
        found |= dict(zip(apart, in_step(instance, truncate, [requests[n] for n in apart], batched), strict=True))
    for n, (name, index, limit) in enumerate(requests):
        if n not in found:
            found[n] = ridders(lambda: instance.loss(truncate), arrays[name], index, limit)
    return [found[n] for n in range(len(requests))]


def in_step(instance, truncate, requests, layout):
    """differences of the requests, their ladders in step, the losses of their next differences from
    layout.losses_of (the layout's unchanged sets built once)."""
    if not requests:
        return []
    arrays = {**instance.params, **instance.initial}
    firsts = [(float(arrays[name][index]), start(arrays[name], index)) for name, index, _ in requests]
    ladders = [ladder(saved, step, limit) for (saved, step), (_, _, limit) in zip(firsts, requests, strict=True)]
    ahead_of = [points(*first) for first in firsts]  # what each ladder will ask for, in order
    asked, known, done, ahead = {n: next(steps) for n, steps in enumerate(ladders)}, {}, {}, FIRST
    losses_of = layout.losses_of(instance, truncate)
    while asked:
        next_of = {n: ahead_of[n][ahead_of[n].index(values) :] for n, values in asked.items()}  # each one's to come
        wanted = [(n, pair) for n, pairs in next_of.items() for pair in pairs[:ahead] if (n, pair) not in known]
        wanted += _spare(next_of, known, ahead, (-2 * len(wanted)) % layout.sets // 2)
        changes = [(*requests[n][:2], value) for n, pair in wanted for value in pair]
        losses = iter(losses_of(changes))
        known.update({(n, pair): (next(losses), next(losses)) for n, pair in wanted})
        for n in list(asked):
            try:
                while (n, asked[n]) in known:
                    asked[n] = ladders[n].send(known[n, asked[n]])
            except StopIteration as end:
                done[n] = end.value
                del asked[n]
        ahead = AHEAD
    return [done[n] for n in range(len(requests))]


def _spare(next_of, known, ahead, room):
    """At most room (ladder, pair)s beyond the first `ahead` of each ladder's next_of, not known, the nearest first:
    what the last forward pass of a round has room for besides its wanted ones (else it repeats the last)."""
    spare = []
    for depth in range(ahead, STEPS):
        if len(spare) >= room:
            break
        spare += [
            (n, pairs[depth]) for n, pairs in next_of.items() if depth < len(pairs) and (n, pairs[depth]) not in known
        ]
    return spare[:room]


def check_unbiased(instance, pi, dtype="float64"):
    """Rows of max |expectation - full BPTT| / max |full BPTT|, at most EXACT[dtype]."""
    expected, tolerance = expected_gradient(instance, pi, dtype), EXACT[dtype]
    rows = []
    for name, full in instance.grads(dtype).items():
        error = float(np.abs(expected[name] - full).max() / max(np.abs(full).max(), np.finfo(float).tiny))
        rows.append(Row(name, error, 0.0, tolerance, error / tolerance))
    return rows


def table(rows, measure="max rel. error", estimate="FD error est.", label="parameter"):
    """The rows as text; estimate=None leaves the error-estimate column out."""
    lines = [f"{label:<12}{measure:>16}{estimate or '':>16}  verdict"]
    for row in rows:
        shown = f"{row.estimate:>16.2e}" if estimate else f"{'':>16}"
        verdict = "ok" if row.ok else "FAIL"
        lines.append(f"{row.name:<12}{row.error:>16.2e}{shown}  {verdict} (tolerance {row.tolerance:.0e})")
    return "\n".join(lines)
