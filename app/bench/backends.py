"""`bptt bench --backend`: a backend's generated module, called on its framework's arrays through the backend's
adapter (codegen/adapter.py).

The problem (parameters, inputs, targets) is made once in NumPy and converted; the generated module's
loss_and_grads is what is timed, as the framework's own modules are (its adapter's peer: peers_torch.py,
peers_jax.py), JAX's under jax.jit as the peer is. Each call runs to completion (JAX: block_until_ready)
before the clock stops.
"""

from bptt.codegen.backends import of


def arrays(backend, problem):
    """The problem (params, xs, ys, initial: NumPy arrays) as the backend's arrays, its framework on one thread."""
    adapter = of(backend)
    adapter.load()
    adapter.single_thread()
    adapter.prepare()
    return adapter.to_framework(tuple(problem))


def generated_call(backend, module, problem, **padded):
    """(run, collect) for the generated module of `backend`: collect(run()) -> (loss, {key: NumPy gradient}),
    loss_and_grads under the adapter's jit, as a training step calls it (the checks of values run outside jit).
    padded: lengths= (a NumPy array), or nothing."""
    adapter = of(backend)
    params, xs, ys, initial, padded = arrays(backend, (*problem, padded))
    step = adapter.jit(module.loss_and_grads)

    def run():
        return adapter.ready(step(params, xs, ys, **initial, **padded))

    def collect(result):
        loss, grads = result
        return float(loss), adapter.to_numpy(grads)

    return run, collect
