"""`bptt bench MODEL --lengths 5,3,1|T|random`: what lengths= costs, the generated module's loss_and_grads on a
right-padded batch against the same call without lengths, in the same run (bench.py's round-robin, one core).

Before it is timed, the padded call's loss and gradients are checked against each sequence run alone on its
own steps (the unpadded NumPy module on sequence b's first lengths[b] steps; the batch's loss is the mean of
theirs). The call without lengths is checked too when every length is T (then it is the same loss); with
shorter sequences its loss counts the padded steps, so it is only a timing reference.
"""

from bptt.app.bench.backends import generated_call
from bptt.app.bench.measuring import measured, random_problem
from bptt.codegen.backends import of

PADDED = "generated"  # the row of the call with lengths= (bench.measured's ratios are its time / another's)
UNPADDED = "no lengths"


def run(module, sizes, steps, batch, dtype, lengths, repeats=7, seed=0, backend=None, numpy_module=None):
    """(rows: the padded call's, then the unpadded one's, its ratio padded / unpadded; the lengths drawn).
    lengths: a Lengths (runtime/options.py), drawn after the problem's arrays from the same seed."""
    import numpy as np

    reference = numpy_module or module
    problem, rng = random_problem(reference, sizes, steps, batch, dtype, seed)
    drawn = np.asarray(lengths.draw(rng, steps, batch), dtype=np.int64)
    found = {PADDED: call(module, problem, backend, drawn), UNPADDED: call(module, problem, backend)}
    if not all(drawn == steps):
        found[UNPADDED] = (found[UNPADDED][0], lambda result: None)
    expected = alone(reference, problem, drawn)
    untested = "the same call without lengths= (its loss counts the padded steps too): not compared"
    rows = measured(found, expected, dtype, repeats, untested)
    return [rows[PADDED], rows[UNPADDED]], drawn


def call(module, problem, backend, lengths=None):
    """(run, collect) of the module's loss_and_grads on the problem, with lengths= if given (a NumPy array)."""
    padded = {} if lengths is None else {"lengths": lengths}
    if not of(backend).reference:
        return generated_call(backend, module, problem, **padded)
    params, xs, ys, initial = problem
    return lambda: module.loss_and_grads(params, xs, ys, **initial, **padded), lambda result: result


def alone(module, problem, lengths):
    """(loss, gradients) of a padded batch from each sequence run alone on its own steps: the loss and parameter
    gradients the mean of theirs, an initial state's gradient their rows side by side, over the batch's size."""
    import numpy as np

    params, xs, ys, initial = problem
    results = [
        module.loss_and_grads(params, xs[:steps, b : b + 1], ys[:steps, b : b + 1], **initial)
        for b, steps in enumerate(lengths)
    ]
    joined = {key: np.concatenate if key in module.STATES else sum for key in results[0][1]}
    grads = {key: join([result[1][key] for result in results]) / len(results) for key, join in joined.items()}
    return sum(result[0] for result in results) / len(results), grads


def summary(rows, lengths):
    """One line: the lengths (their range) and what the padded call costs against the unpadded one."""
    padded, unpadded = rows
    shape = f"B={len(lengths)}, lengths {lengths.min()}..{lengths.max()} (mean {lengths.mean():.1f})"
    if unpadded.ratio != unpadded.ratio:  # nan: a call was not timed
        return f"lengths=: {shape}; not timed ({padded.note or unpadded.note})"
    return f"lengths= / no lengths: {unpadded.ratio:.2f} ({shape})"
