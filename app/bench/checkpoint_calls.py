"""The calls `bptt bench --checkpoints` times: a generated module's loss_and_grads with a budget (None:
full BPTT), and its forward pass alone, on its backend's arrays (made once in NumPy: app/bench/backends.py)."""

import numpy as np

from bptt.app.bench.backends import arrays
from bptt.codegen.backends import of


def call(backend, module, problem, checkpoints):
    """(run, collect): collect(run()) -> (loss, {key: NumPy gradient})."""
    params, xs, ys, initial = arrays(backend, problem)
    ready = of(backend).ready

    def run():
        return ready(module.loss_and_grads(params, xs, ys, **initial, checkpoints=checkpoints))

    def collect(result):
        loss, grads = result
        return float(loss), {key: np.asarray(value) for key, value in grads.items()}

    return run, collect


def fresh(module, run):
    """run with the NumPy module's workspace released first, so that the memory it measures counts full BPTT's
    arrays (a training loop keeps them between calls: the timed calls do)."""
    release = getattr(module, "free_workspace", None)
    return run if release is None else lambda: (release(), run())[1]


def forward_call(backend, module, problem):
    """A call of the forward pass alone (its outputs and cache), the share of the time recomputation repeats."""
    params, xs, ys, initial = arrays(backend, problem)
    teacher = (ys,) if getattr(module, "TEACHER_FORCED", ()) else ()
    ready = of(backend).ready
    return lambda: ready(module.forward(params, xs, *teacher, **initial))
