"""The tests' XLA flags (tests/support/xla.py): compile fast, one thread, a user's own flags kept and winning."""

import os
import subprocess
import sys

import numpy as np
import pytest

from bptt.tests.support import xla


def test_the_tests_compile_with_the_older_fusion_emitters_where_xla_knows_the_flag():
    """On the jaxlib this suite runs (0.6-0.10 know the flag) fusions come from the older emitters, which compile
    a zoo module in about a third of the MLIR ones' time; on another jaxlib the flag is left out (an unknown flag
    aborts the process)."""
    known = xla._jaxlib_version() is not None and xla.KNOWN_FROM <= xla._jaxlib_version() < xla.KNOWN_BEFORE
    assert ("--xla_cpu_use_fusion_emitters=false" in xla.flags().split()) == known
    assert set(xla.ONE_THREAD + xla.FAST_COMPILE) <= set(xla.flags().split())


def test_the_tests_compile_a_program_in_one_piece_where_measured():
    """On the jaxlib where it was measured (0.10), one thread compiles each program unsplit, copy insertion without
    its region analysis; on another jaxlib neither flag (an unknown flag aborts the process)."""
    version = xla._jaxlib_version()
    known = version is not None and xla.ONE_PIECE_FROM <= version < xla.ONE_PIECE_BEFORE
    flags = set(xla.flags().split())
    assert set(xla.ONE_PIECE) <= flags if known else not set(xla.ONE_PIECE) & flags


def test_a_users_flag_of_the_same_name_wins():
    given = "--xla_cpu_use_fusion_emitters=true --xla_dump_to=/tmp/x"
    flags = xla.flags(given).split()
    assert flags[:2] == given.split() and "--xla_cpu_use_fusion_emitters=false" not in flags


def test_the_workers_run_with_the_tests_flags():
    """tests/conftest.py set XLA_FLAGS before JAX started: this process compiles with them."""
    assert set(xla.flags().split()) <= set(os.environ["XLA_FLAGS"].split())


def test_the_workers_lower_every_program_in_one_mlir_context():
    """On the jaxlib this suite runs, JAX's programs share one MLIR context (xla.one_mlir_context), and a program
    lowered in it is the module a context of its own gives."""
    import jax
    import jax.numpy as jnp
    from jax._src.interpreters import mlir

    version = xla._jaxlib_version()
    known = version is not None and xla.ONE_CONTEXT_FROM <= version < xla.ONE_CONTEXT_BEFORE
    assert xla.one_mlir_context() == known
    if not known:
        return
    assert mlir.make_ir_context() is mlir.make_ir_context()

    def lowered():
        def program(x):  # a new function each time: lowered anew, not found in JAX's caches
            return jnp.tanh(x @ x.T).sum(axis=0)

        return jax.jit(program).lower(jnp.ones((3, 2))).as_text()

    shared, made, contexts = lowered(), mlir.make_ir_context, []
    mlir.make_ir_context = lambda: contexts.append(made.made()) or contexts[-1]
    try:
        own = lowered()
    finally:
        mlir.make_ir_context = made
    assert len(contexts) == 1 and contexts[0] is not made.shared
    assert shared == own


# One program, lowered from the same source (its locations too) in this process and in a child.
SHARED_PROGRAM = """
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", {x64})  # as in the test process (test modules turn it on)
program = jax.jit(lambda x: jnp.sin(x) * {token} + jnp.cos(x).sum())
program(jnp.ones((3, 5)))
"""


def test_a_program_the_other_worker_compiled_is_loaded_not_compiled_again():
    """The test processes share the run's compilation cache (xla.use_compilation_cache): a program a process of
    its own compiled (as the other worker would) this one loads from it, compiling nothing; the program's result
    is the same. The run's cache is not set through JAX's environment variables, which the CLI processes the tests
    start would inherit."""
    import jax
    from jax._src import compiler

    folder = os.environ[xla.CACHE_FOLDER]
    assert jax.config.jax_compilation_cache_dir == folder and os.path.isdir(folder)
    assert os.environ.get("JAX_COMPILATION_CACHE_DIR") in (None, folder)
    token = 1 + int.from_bytes(os.urandom(4), "little") / 2**32  # a program compiled nowhere before
    source = SHARED_PROGRAM.format(token=repr(token), x64=jax.config.jax_enable_x64)
    child = (
        "import os, sys; from bptt.tests.support import xla; xla.use_compilation_cache(os.environ); "
        "exec(compile(sys.argv[1], '<shared program>', 'exec'))"
    )
    before = set(os.listdir(folder))
    done = subprocess.run([sys.executable, "-c", child, source], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert set(os.listdir(folder)) - before, "the child wrote no program into the cache"
    compiled, compile_program, scope = [], compiler.backend_compile_and_load, {}

    def counted(*args, **kwargs):
        compiled.append(args)
        return compile_program(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiler, "backend_compile_and_load", counted)
        exec(compile(source, "<shared program>", "exec"), scope)
    assert compiled == [], "a program the other process compiled was compiled again"
    expected = np.sin(np.ones((3, 5))) * token + 15 * np.cos(1.0)
    np.testing.assert_allclose(np.asarray(scope["program"](jax.numpy.ones((3, 5)))), expected, rtol=1e-6)
