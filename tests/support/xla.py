"""XLA's flags for the tests, set by tests/conftest.py before JAX starts its CPU backend (and so inherited by the
CLI processes the tests start). The tests' arrays are tiny: compiling, not running, is what their JAX code costs,
so XLA compiles fast rather than well: LLVM without its expensive passes, and fusions emitted by XLA's older
emitters, not the MLIR ones, which set up an MLIR context and its rewrite patterns for every program (measured on
jaxlib 0.10: a small operation's compile about halves, a zoo module's to about a third). The same programs,
computed to the tests' tolerances. One thread, as every worker's BLAS: so a program's machine code made in one
piece (XLA splits it in parts for threads to compile at once: each part's a module of its own to set up), and copy
insertion without its region analysis (measured on jaxlib 0.10: a zoo module's compile about 40% less, the two
together). Without the split, the machine code of a fusion may round differently in its last bit (a float64
gradient's relative difference up to about 1e-14 in the zoo's modules; the tests' tolerances are 1e-12 and more);
the region analysis changes no result.

Tried on jaxlib 0.10.2 and left out, none measurably faster (the tests' programs recompiled in one process, each
alternating with the flags above; the same flags twice differ by up to 1.5%): xla_cpu_use_xnnpack=false,
xla_cpu_max_isa=AVX2, the three xla_llvm_enable_*_metadata=false, xla_cpu_opt_preset=CPU_OPT_PRESET_FAST_COMPILE
(float64 results differ up to 2e-13), xla_hlo_evaluator_use_fast_path, xla_detailed_logging=false, and
xla_disable_hlo_passes of small-while-loop-hoisting, while-loop-trip-count-annotator, cse, constant_folding or
simplify-while-loops; xla_cpu_enable_platform_dependent_math=false changes float64 gradients by up to 1e-12 relative.
What is left is per kernel: XLA compiles each unfused kernel as an LLVM module of its own (a target machine, its
intrinsics' passes and machine code for each), which no flag changes. JAX's MLIR locations take 1-2% of a
program's lowering and compile: jax_include_full_tracebacks_in_locations=False and
jax_traceback_in_locations_limit=0 showed no gain, nor did jax_use_shardy_partitioner=False.

(The older emitters were once blamed for workers aborting inside XLA's compiler; the cause was every random
cell's module compiled whole, whose programs filled the process's 65,530 memory maps (tests/support/jax_eager.py
now runs them eagerly). The older emitters take no more maps per program.)"""

import importlib.metadata
import importlib.util
import sys
import tempfile

ONE_THREAD = ("--xla_cpu_multi_thread_eigen=false",)
FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")
# jax.jit(compiler_options=...) for a program that runs long (the README's training loop): XLA's defaults again
OPTIMISED = {"xla_backend_optimization_level": 3, "xla_llvm_disable_expensive_passes": False}
# An XLA that does not know a flag aborts the process: this one only where it is known to exist.
OLDER_FUSION_EMITTERS = ("--xla_cpu_use_fusion_emitters=false",)
KNOWN_FROM, KNOWN_BEFORE = (0, 6), (0, 11)  # jaxlib versions (major, minor)
ONE_PIECE = ("--xla_cpu_parallel_codegen_split_count=1", "--xla_cpu_copy_insertion_use_region_analysis=false")
ONE_PIECE_FROM, ONE_PIECE_BEFORE = (0, 10), (0, 11)  # where ONE_PIECE was measured
ONE_CONTEXT_FROM, ONE_CONTEXT_BEFORE = (0, 10), (0, 11)  # where one_mlir_context was measured


def _jaxlib_version():
    try:
        return tuple(int(part) for part in importlib.metadata.version("jaxlib").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def flags(given=""):
    """XLA_FLAGS: those given first, then each of the tests' flags whose name they do not set."""
    ours = ONE_THREAD + FAST_COMPILE
    version = _jaxlib_version()
    if version is not None and KNOWN_FROM <= version < KNOWN_BEFORE:
        ours += OLDER_FUSION_EMITTERS
    if version is not None and ONE_PIECE_FROM <= version < ONE_PIECE_BEFORE:
        ours += ONE_PIECE
    named = {flag.partition("=")[0] for flag in given.split()}
    return " ".join(given.split() + [flag for flag in ours if flag.partition("=")[0] not in named])


def one_mlir_context():
    """JAX lowers each program in an MLIR context of its own, made for it (about 5 ms with every dialect loaded) and
    kept alive with the compiled program (about 1.2 MB each): the tests compile thousands of small programs. From
    here on this process lowers them all in one context, as JAX's own lowering lets a caller do (ModuleContext takes
    a context): the same modules, so the same programs and results; measured on jaxlib 0.10, a small program's
    lowering and compile costs about a third less, and 1,200 programs hold 1.4 GB less memory. Done once JAX is
    imported (tests/conftest.py, after collection); elsewhere, and on another jaxlib, JAX's own way is left alone.
    Returns whether it is on."""
    mlir = sys.modules.get("jax._src.interpreters.mlir")
    version = _jaxlib_version()
    if mlir is None or version is None or not ONE_CONTEXT_FROM <= version < ONE_CONTEXT_BEFORE:
        return False
    made = mlir.make_ir_context
    if getattr(made, "shared", None) is None:
        shared = made()

        def one_context():
            return shared

        one_context.shared, one_context.made = shared, made
        mlir.make_ir_context = one_context
    return True


CACHE_FOLDER = "BPTT_TESTS_XLA_CACHE"  # the environment variable naming the run's cache folder, for its workers


def shared_compilation_cache(environ):
    """A new empty folder for this run's JAX persistent compilation cache, named in environ (CACHE_FOLDER) for the
    workers to use (use_compilation_cache). Returns it, for the process that made it to remove; None where the run
    has one already (a worker, from its controller). Nothing outlives the run: a clean checkout compiles everything
    once."""
    if CACHE_FOLDER in environ:
        return None
    environ[CACHE_FOLDER] = tempfile.mkdtemp(prefix="bptt-xla-cache-")
    return environ[CACHE_FOLDER]


def use_compilation_cache(environ):
    """Point this process's JAX at the run's compilation cache (before it compiles anything: JAX decides once), so
    that a program one worker compiled, the other loads instead of compiling it again (eager operations on the same
    shapes, the zoo's modules: XLA's time over the suite 94-95 CPU-s before, 81-87 after, on jaxlib 0.10.2). Every
    program is kept, however fast it compiled. An entry read while the other worker writes it does not load: JAX
    warns and compiles the program. Set in the test processes only, not through JAX's environment variables: the
    CLI processes the tests start compile on their own, as a user's do, and no such warning reaches their output.
    Returns whether it is on."""
    folder = environ.get(CACHE_FOLDER)
    if folder is None or importlib.util.find_spec("jax") is None:
        return False
    import jax

    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # -1: every size (0 lets JAX pick a minimum)
    return True
