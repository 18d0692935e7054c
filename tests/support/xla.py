"""XLA's flags for the tests, set by tests/conftest.py before JAX starts its CPU backend (and so inherited by the
CLI processes the tests start). The tests' arrays are tiny: compiling, not running, is what their JAX code costs,
so XLA compiles fast rather than well: LLVM without its expensive passes. The same programs, computed to the
tests' tolerances. One thread, as every worker's BLAS. (XLA's older fusion emitters, which compile faster still,
aborted inside XLA's compiler in two of two full runs of the suite, so they are not used.)

The compiled programs are shared (shared_cache): the workers and the CLI processes the tests start compile many of
the same small programs (JAX's eager operations on the random cells' shapes, the zoo modules), each once per run."""

import importlib.util
import shutil
import tempfile

ONE_THREAD = ("--xla_cpu_multi_thread_eigen=false",)
FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")


def flags(given=""):
    """XLA_FLAGS: those given first, then each of the tests' flags whose name they do not set."""
    ours = ONE_THREAD + FAST_COMPILE
    named = {flag.partition("=")[0] for flag in given.split()}
    return " ".join(given.split() + [flag for flag in ours if flag.partition("=")[0] not in named])


# JAX's persistent compilation cache, read from the environment when JAX starts. Every program is kept, however
# fast it compiled; a size limit turns on JAX's file lock, so that no process reads an entry half-written.
CACHE = "JAX_COMPILATION_CACHE_DIR"
CACHE_SETTINGS = {
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    "JAX_COMPILATION_CACHE_MAX_SIZE": str(2**31),
}


def shared_cache(environ):
    """Point JAX's compilation cache at a new folder for this run of the tests (inherited by the xdist workers and
    the processes they start); the folder, or None if the environment names a cache already (kept as it is) or
    JAX's file lock cannot be had (the filelock package, which torch brings: no cache then)."""
    if CACHE in environ or importlib.util.find_spec("filelock") is None:
        return None
    folder = tempfile.mkdtemp(prefix="bptt-tests-xla-")
    environ[CACHE] = folder
    for name, value in CACHE_SETTINGS.items():
        environ.setdefault(name, value)
    return folder


def remove_cache(folder):
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
