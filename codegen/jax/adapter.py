"""The JAX backend as the app sees it (codegen/adapter.py): float64 enabled, arrays from and to NumPy,
functions under jax.jit, results waited for (JAX dispatches asynchronously), keys for random truncation, and
jax.grad of a scan as bench's peer."""

from bptt.codegen.adapter import Adapter


class JaxAdapter(Adapter):
    name, title, suffix, framework, extra = "jax", "JAX", "_jax", "jax", "jax"
    renderer, runtime = "bptt.codegen.jax.render", "bptt.runtime.jax"
    peer = "bptt.app.bench.peers_jax"
    numpy_arrays = False
    traced = True
    compiles = True

    def prepare(self):
        self.load().config.update("jax_enable_x64", True)

    def array(self, value):
        return self.load().numpy.asarray(value)

    def jit(self, function, static=()):
        return self.load().jit(function, static_argnames=static or None)

    def ready(self, result):
        return self.load().block_until_ready(result)

    def draws(self, seed, steps):
        import numpy as np

        jax = self.load()
        key = jax.random.key(seed)
        return key, np.asarray(jax.random.uniform(key, (steps,), dtype=jax.numpy.float64))

    def uniforms(self, generator, steps):
        import numpy as np

        jax = self.load()
        return np.asarray(jax.random.uniform(generator, (steps,), dtype=jax.numpy.float64))


ADAPTER = JaxAdapter()
