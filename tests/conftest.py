"""Fixtures shared by the tests, and the order in which pytest-xdist hands them out."""

import atexit
import gc
import logging
import os
import shutil
import sys

# One thread per worker process (pytest-xdist runs a worker per core): BLAS, torch's OpenMP and XLA's Eigen pool
# would otherwise each start a thread per core in every worker, and their waiting threads take CPU from the others.
# Set before numpy, torch or jax is imported; the workers and the CLI processes the tests start inherit it.
# XLA compiles fast rather than well (tests/support/xla.py): the tests' arrays are tiny.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

from bptt.tests.support import xla  # noqa: E402

os.environ["XLA_FLAGS"] = xla.flags(os.environ.get("XLA_FLAGS", ""))
_compilation_cache = xla.shared_compilation_cache(os.environ)
if _compilation_cache is not None:
    atexit.register(shutil.rmtree, _compilation_cache, ignore_errors=True)

import pytest  # noqa: E402


def _hypothesis_imported_as_it_is():
    """pytest rewrites the asserts of every module of a plugin's distribution, so Hypothesis's 70 modules too: about
    0.8 s in each process (each worker, and the controller) that imports it, where no bytecode is written
    (PYTHONDONTWRITEBYTECODE). Its asserts are its own invariants, not the tests': it is imported unrewritten."""
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and "hypothesis" in marked:
            marked.discard("hypothesis")
            finder._marked_for_rewrite_cache.clear()


_hypothesis_imported_as_it_is()


def _draws_independent_of_loaded_modules():
    """Hypothesis (since 6.131) mixes into its draws the constants of the local modules loaded so far: a
    derandomized test would draw other examples after other tests loaded other modules (a random cell's
    generated module, a zoo module), so that which cells are proven would depend on the order the tests ran
    in. Its local constants are kept empty (its own constants still apply): the same draws in any order."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # an older Hypothesis: no local constants
        return
    if hasattr(providers, "_get_local_constants"):
        providers._get_local_constants = providers.Constants


def _hypothesis_random_registered_while_the_heap_is_small():
    """Hypothesis registers its global Random on the first derandomized test a process runs, with a full garbage
    collection and a search of every object for its referrers: a second or more once a worker holds a share of the
    suite. The same registration, done before collection, costs nothing."""
    import random

    try:
        from hypothesis import core
        from hypothesis.internal.entropy import register_random

        if core.threadlocal._hypothesis_global_random is None:
            core.threadlocal._hypothesis_global_random = random.Random()
            register_random(core.threadlocal._hypothesis_global_random)
    except (ImportError, AttributeError):  # no Hypothesis, or another one: it registers its own way
        return


@pytest.fixture(scope="session")
def concrete_problem():
    """make_problem(name, steps, seed), e.g. concrete_problem("elman", 3, seed=1)."""
    from bptt.tests.support.problems import make_problem

    return make_problem


@pytest.fixture
def user_file(tmp_path):
    """A user's model file with a sigmoid RNN (and a model named like a zoo one)."""
    from bptt.tests.support.cli import USER_MODELS

    path = tmp_path / "user_models.py"
    path.write_text(USER_MODELS, encoding="utf-8")
    return path


def pytest_addoption(parser):
    parser.addoption(
        "--fail-on-skip",
        action="store_true",
        help="a skipped test fails (CI: every framework is installed, so nothing may be skipped)",
    )
    parser.addoption(
        "--cpu-durations",
        type=int,
        default=0,
        metavar="N",
        help="after the run, the N test files that took the most CPU seconds, and XLA's share (tests/support/"
        "cpu_durations.py): what a file costs on a loaded machine, where --durations's wall times mislead",
    )


def _failed_if_skipped(report, config):
    if report.skipped and config.getoption("fail_on_skip"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome, report.longrepr = "failed", f"skipped under --fail-on-skip: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _failed_if_skipped(report, item.config)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _failed_if_skipped(report, collector.config)
    return report


def _no_forced_collections_after_a_worker_reported(config):
    """pytest's cleanup collects garbage five times (to report exceptions raised in finalizers) after everything
    else; a pytest-xdist worker gets there after it has sent its last report, so what it finds reaches no report,
    and with the heap a worker's share of the suite leaves (millions of objects) it takes about 9 s. xdist's worker
    interrupts it after 5 s (the KeyboardInterrupt the CI log showed in Hypothesis's gc callback). Workers skip it;
    a run without xdist (-n 0) keeps it. Garbage found while a test runs is reported with that test, as before."""
    if not hasattr(config, "workerinput"):
        return
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:  # another pytest: its own cleanup
        return
    config.stash[gc_collect_iterations_key] = 0


def _workers_leave_without_tearing_down(config):
    """A pytest-xdist worker, its session over and reported, ends without the interpreter's teardown: freeing a
    worker's heap (millions of objects, thousands of XLA programs) took about 8.5 s, and xdist's controller waits for
    its workers to end before it ends the run (measured over the suite: the last worker's report to the run's end,
    10 s; 1.4 s this way). The atexit handlers registered from here on run first (the temporary folders' cleanup,
    JAX's and torch's own), then buffered output is written and the process exits. What xdist reads of a worker is
    its reports, not its exit status; a run without xdist (-n 0), or a child forked from a worker that exits through
    Python's exit, ends as Python ends."""
    if not hasattr(config, "workerinput"):
        return
    worker = os.getpid()

    def leave():
        if os.getpid() != worker:
            return
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(0)

    atexit.register(leave)


def _collections_scaled_to_the_heap():
    """Python collects cycles after every 700 net allocations, and the whole heap after 100 of those with a quarter
    more long-lived objects: a worker holds two million objects (SymPy's caches, torch, JAX, the modules generated),
    so the full walks took 15 of its 20 CPU-s of collections (measured with gc.callbacks over the suite). A worker
    collects every 50,000 and the whole heap a hundred times rarer: about a third of the collections' time, with a
    tenth more objects alive at the end. What a test frees by its reference count is freed as before."""
    gc.set_threshold(50_000, 20, 100)


def _runs_tests(config):
    """Whether this process runs tests: a worker, or a run without pytest-xdist (-n 0); not xdist's controller,
    which hands them out (and, started before the workers, delays them by what it loads)."""
    return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def pytest_configure(config):
    _no_forced_collections_after_a_worker_reported(config)
    _workers_leave_without_tearing_down(config)
    if _runs_tests(config):
        xla.use_compilation_cache(os.environ)
        _collections_scaled_to_the_heap()
        _draws_independent_of_loaded_modules()
        _hypothesis_random_registered_while_the_heap_is_small()
    if config.getoption("cpu_durations"):
        from bptt.tests.support.cpu_durations import Measure

        config.pluginmanager.register(Measure(config.getoption("cpu_durations"), _runs_tests(config)), "cpu_durations")
    config.addinivalue_line(
        "markers",
        "slow(seconds=0, unit=None): a long proof, scheduled first so that the workers finish together; those given "
        "about how many CPU seconds they take on CI before the others, the longest first; those naming the same unit "
        "run in one worker, one after the other",
    )


def pytest_collection_finish(session):
    """The test modules are imported: if they imported JAX, its programs lowered in one MLIR context (xla.py)."""
    xla.one_mlir_context()


def _order(item):
    """Slow tests first, the longest of those given seconds first; then the units of several modules (those naming
    an XDIST_GROUP, the largest units), so that none is handed out last while the other worker runs out of work (a
    timeline of both workers showed one waiting 13 s for the reverse cells' unit of 54 s); the others in the order
    collected."""
    slow = item.get_closest_marker("slow")
    if slow is not None:
        return (0, -slow.kwargs.get("seconds", 0))
    return (1 if hasattr(item.module, "XDIST_GROUP") else 2, 0)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(items):
    """Slow tests first, then the units of several modules (_order). A slow test is a work unit of its own, or of the
    slow tests naming its unit; the other tests of a module form one unit (of modules naming the same XDIST_GROUP, one
    unit together), so that their fixtures and caches are computed by one worker, not by each."""
    for item in items:
        slow = item.get_closest_marker("slow")
        if slow is None:
            item.add_marker(pytest.mark.xdist_group(getattr(item.module, "XDIST_GROUP", item.module.__name__)))
        elif slow.kwargs.get("unit"):
            item.add_marker(pytest.mark.xdist_group(slow.kwargs["unit"]))
    items.sort(key=_order)
