"""XLA's flags for the tests, set by tests/conftest.py before JAX starts its CPU backend (and so inherited by the
CLI processes the tests start). The tests' arrays are tiny: compiling, not running, is what their JAX code costs,
so XLA compiles fast rather than well: LLVM without its expensive passes. The same programs, computed to the
tests' tolerances. One thread, as every worker's BLAS. (XLA's older fusion emitters, which compile faster still,
aborted inside XLA's compiler in two of two full runs of the suite, so they are not used.)"""

ONE_THREAD = ("--xla_cpu_multi_thread_eigen=false",)
FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")


def flags(given=""):
    """XLA_FLAGS: those given first, then each of the tests' flags whose name they do not set."""
    ours = ONE_THREAD + FAST_COMPILE
    named = {flag.partition("=")[0] for flag in given.split()}
    return " ".join(given.split() + [flag for flag in ours if flag.partition("=")[0] not in named])
