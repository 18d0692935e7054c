"""The calls `bptt bench --checkpoints` times: a generated module's loss_and_grads with a budget (None:
full BPTT), and its forward pass alone, on NumPy's, torch's or JAX's arrays (made once in NumPy)."""

import numpy as np

from bptt.codegen.backends import require


def call(backend, module, problem, checkpoints):
    """(run, collect): collect(run()) -> (loss, {key: NumPy gradient})."""
    params, xs, ys, initial = _arrays(backend, problem)

    def run():
        result = module.loss_and_grads(params, xs, ys, **initial, checkpoints=checkpoints)
        return _ready(backend, result)

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
    params, xs, ys, initial = _arrays(backend, problem)
    teacher = (ys,) if getattr(module, "TEACHER_FORCED", ()) else ()
    return lambda: _ready(backend, module.forward(params, xs, *teacher, **initial))


def _arrays(backend, problem):
    params, xs, ys, initial = problem
    if backend == "numpy":
        return problem
    if backend == "torch":
        torch = require("torch")
        torch.set_num_threads(1)
        convert = torch.from_numpy
    else:
        jax = require("jax")
        jax.config.update("jax_enable_x64", True)
        convert = jax.numpy.asarray
    return (
        {k: convert(v) for k, v in params.items()},
        convert(xs),
        convert(ys),
        {k: convert(v) for k, v in initial.items()},
    )


def _ready(backend, result):
    """result, computed to the end (JAX dispatches asynchronously)."""
    if backend == "jax":
        return require("jax").block_until_ready(result)
    return result
