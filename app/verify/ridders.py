"""Ridders' method: a derivative by finite differences whose step follows the function,
with an estimate of its own error (Numerical Recipes, section 5.7, dfridr)."""

import math

import numpy as np

# Ridders' method: the first step and how it shrinks; at most STEPS steps and ORDERS orders of
# extrapolation; a growing error (rounding taking over) stops it once above SAFE times the best.
START, SHRINK, STEPS, ORDERS, SAFE = 0.1, 2.0, 16, 4, 2.0
ROUNDING = 8  # a floor on a central difference's rounding noise: 8 eps |loss| / step
EPS = float(np.finfo(float).eps)


def ridders(loss, array, index, enough=0.0):
    """(derivative, error estimate) of loss() along array[index] (restored afterwards): ladder's
    differences, each loss evaluated with the entry set in place. A difference of losses is taken
    first, so an entry the loss does not read gets exactly 0."""
    saved = float(array[index])

    def losses(values):
        found = []
        for value in values:
            array[index] = value
            found.append(loss())
        return found

    try:
        return drive(ladder(saved, start(array, index), enough), losses)
    finally:
        array[index] = saved


def start(array, index):
    """The first step along array[index]: START times max(|entry|, rms of the array), or START."""
    mean_square = float(np.add.reduce(np.square(array), axis=None)) / array.size  # np.mean's sum, divided
    return START * (max(abs(float(array[index])), math.sqrt(mean_square)) or 1.0)


def drive(steps, losses):
    """What a ladder returns, its requests answered by losses(values) -> the loss at each value."""
    try:
        values = next(steps)
        while True:
            values = steps.send(losses(values))
    except StopIteration as done:
        return done.value


def ladder(saved, step, enough=0.0):
    """Ridders' method as a generator: it yields the entry's two next values (saved + h, saved - h),
    is sent the losses there, and returns (derivative, error estimate).

    Central differences at steps h, h/SHRINK, ..., from the given first step, are extrapolated to a
    zero step in a Neville tableau (Numerical Recipes' dfridr); an extrapolation's error estimate is
    its distance from the two values it came from. The tableau starts once the differences converge
    (_converging); the best estimate is kept, and the ladder stops once it is below `enough` or the
    error grows. If they never converge, the last difference is returned with the spread of all of
    them as its error. A generator, so that the losses of many ladders can be computed together.

    A later extrapolation that differs from the best by more than SAFE times their two estimates replaces it,
    though its own estimate is larger: the two cannot both hold, and the later comes from smaller steps. The
    earlier ones' steps may reach past where the loss's Taylor series converges (a norm whose deviation is
    small has a singularity near: lstm-layernorm at T=200), where extrapolations can agree by chance."""
    best, error, tableau, differences, noise, growing = np.nan, np.inf, None, [], [], 0
    for up, down in points(saved, step):
        rise, fall = yield up, down
        difference, rounding = _central(rise, fall, up, down)
        if not np.isfinite(difference):  # far too large a step: start again
            differences, noise, tableau = [], [], None
            continue
        differences.append(difference)
        noise.append(rounding)
        if tableau is None and not _converging(differences, noise, enough):
            continue
        if tableau is None:  # the tableau starts with the steps that showed convergence
            tableau, new = [], zip(differences[-4:], noise[-4:], strict=True)
        else:
            new = [(difference, rounding)]
        for pair in new:
            tableau, value, estimate = _extrapolate(tableau, *pair)
            if estimate <= error or abs(value - best) > SAFE * (estimate + error):  # better, or the best contradicted
                best, error = value, estimate
            growing = growing + 1 if estimate > SAFE * error else 0
        if growing >= 2 or error <= enough:  # rounding has taken over, or the error is small enough
            break
    if error < np.inf:
        return best, error
    return (differences[-1], float(np.ptp(differences))) if len(differences) > 1 else (np.nan, np.inf)


def points(saved, step):
    """The entry's values a ladder asks for, in order: (saved + h, saved - h) for h = step, step / SHRINK,
    ... (STEPS of them)."""
    return [(saved + step / SHRINK**j, saved - step / SHRINK**j) for j in range(STEPS)]


def _central(rise, fall, up, down):
    """(rise - fall) / (up - down), the central difference of losses rise at up and fall at down,
    and its rounding noise."""
    return (rise - fall) / (up - down), ROUNDING * EPS * max(abs(rise), abs(fall)) / (up - down)


def _extrapolate(previous, difference, rounding):
    """The next row of the Neville tableau (extrapolations to a zero step of the differences
    so far), its best value and that value's error estimate (inf on the first row), at least
    the difference's rounding noise."""
    row, value, error = [difference], difference, np.inf
    for order, last in enumerate(previous[:ORDERS], start=1):
        row.append(row[-1] + (row[-1] - last) / (SHRINK ** (2 * order) - 1))
        estimate = max(abs(row[order] - row[order - 1]), abs(row[order] - last), rounding)
        if estimate < error:
            value, error = row[order], estimate
    return row, value, error


def _converging(differences, noise, enough):
    """Whether the central differences have reached the regime where Richardson extrapolation
    holds: their last three changes shrink about SHRINK^2-fold each (the h^2 term dominates), or the last two are
    small (within the rounding noise of the difference each ends at, or what is enough: the loss is a quadratic
    along the entry, as far as differences can tell). In Python floats: a ladder asks at every step."""
    if len(differences) < 3:
        return False
    last = differences[-4:]
    changes = [abs(new - old) for old, new in zip(last[:-1], last[1:], strict=True)]
    if changes[-2] <= _larger(noise[-2], enough) and changes[-1] <= _larger(noise[-1], enough):
        return True
    if len(changes) < 3:
        return False
    (a, b, c), low, high = changes, 0.8 * SHRINK**2, 1.25 * SHRINK**2
    return low * b <= a <= high * b and low * c <= b <= high * c


def _larger(a, b):
    """np.maximum(a, b) of two floats: nan if either is."""
    return a if a != a or a >= b else b
