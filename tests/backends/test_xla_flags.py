"""The tests' XLA flags (tests/support/xla.py): compile fast, one thread, a user's own flags kept and winning."""

import os

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
