"""JAX's persistent compilation cache, on for a while in a folder of the test's: a program whose XLA computation is
one compiled before in that while (another module's copy of the same code) is read back, not compiled again.

The cache is keyed by the computation itself (its source locations aside), the compile options and XLA's flags: a
program that differs in anything compiles anew. XLA compiles deterministically, so the executable read back is the
one compiling again would give, and a test comparing two modules' results bit for bit proves what it proved."""

import contextlib

import jax
from jax._src import compilation_cache

# every program is written, however fast it compiled or small it is (JAX's defaults keep only the slow ones)
SETTINGS = {
    "jax_persistent_cache_min_compile_time_secs": 0,
    "jax_persistent_cache_min_entry_size_bytes": 0,
}


@contextlib.contextmanager
def compiled_once(folder):
    """Within: JAX's programs cached in `folder`; after: the cache off again, as it was."""
    names = ("jax_compilation_cache_dir", *SETTINGS)
    before = {name: getattr(jax.config, name) for name in names}
    compilation_cache.reset_cache()  # it reads its folder once, when it starts
    for name, value in {"jax_compilation_cache_dir": str(folder), **SETTINGS}.items():
        jax.config.update(name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()
