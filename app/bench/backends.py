"""`bptt bench --backend torch|jax`: a framework's generated module, called on that framework's arrays.

The problem (parameters, inputs, targets) is made once in NumPy and converted; the generated module's
loss_and_grads is what is timed, as the framework's own modules are (peers_torch.py,
peers_jax.py), JAX's under jax.jit as the peer is. Each call runs to completion (JAX:
block_until_ready) before the clock stops.
"""

import numpy as np

from bptt.codegen.backends import require


def generated_call(backend, module, problem):
    """(run, collect) for the generated module of `backend`: collect(run()) -> (loss, {key: NumPy gradient})."""
    return {"torch": _torch, "jax": _jax}[backend](module, problem)


def _torch(module, problem):
    torch = require("torch")
    torch.set_num_threads(1)
    params, xs, ys, initial = problem
    params = {k: torch.from_numpy(v) for k, v in params.items()}
    initial = {k: torch.from_numpy(v) for k, v in initial.items()}
    xs, ys = torch.from_numpy(xs), torch.from_numpy(ys)

    def run():
        return module.loss_and_grads(params, xs, ys, **initial)

    def collect(result):
        loss, grads = result
        return float(loss), {k: v.numpy() for k, v in grads.items()}

    return run, collect


def _jax(module, problem):
    jax = require("jax")
    jax.config.update("jax_enable_x64", True)
    params, xs, ys, initial = problem
    params = {k: jax.numpy.asarray(v) for k, v in params.items()}
    initial = {k: jax.numpy.asarray(v) for k, v in initial.items()}
    xs, ys = jax.numpy.asarray(xs), jax.numpy.asarray(ys)
    step = jax.jit(module.loss_and_grads)  # as a training step calls it (the checks of values run outside jit)

    def run():
        return jax.block_until_ready(step(params, xs, ys, **initial))

    def collect(result):
        loss, grads = result
        return float(loss), {k: np.asarray(v) for k, v in grads.items()}

    return run, collect
