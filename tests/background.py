"""Tests marked `background` run in worker processes while the rest of the suite runs.

The slow numerical proofs (the check sweep, the property tests, finite differences of
truncated losses) are CPU-bound and need nothing from other tests, while the rest of the
suite is mostly one process. conftest.py moves the marked tests last and, once collection is
done, hands them here: each is run in a worker (one per core, forked, at low priority so that
the rest of the suite keeps its core). When its turn comes, the test item only waits for the
worker's outcome: what it printed, or the exception it raised (with the worker's traceback).

A background test takes only parametrized arguments, no fixtures."""

import concurrent.futures
import contextlib
import inspect
import io
import multiprocessing
import os
import sys

import pytest

MARK = "background"
_tests = {}  # nodeid -> (function, arguments): read by the forked workers
_pool = {}


def is_background(item):
    return item.get_closest_marker(MARK) is not None


def arguments(item):
    """The item's parametrized arguments; a UsageError if it asks for anything else."""
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    wanted = list(inspect.signature(item.obj).parameters)
    missing = [name for name in wanted if name not in params]
    if missing:
        raise pytest.UsageError(f"{item.nodeid}: a background test takes parametrized arguments only, not {missing}")
    return {name: params[name] for name in wanted}


def start(items):
    """Run the items' functions in worker processes, in the items' order."""
    xla = sys.modules.get("jax._src.xla_bridge")
    if xla is not None and xla._backends:  # XLA's threads do not survive the fork: a worker compiling would hang
        raise pytest.UsageError("JAX was started while the tests were collected; start it inside a test, not at import")
    _tests.update((item.nodeid, (item.obj, arguments(item))) for item in items)
    context = multiprocessing.get_context("fork")  # the workers inherit _tests
    executor = concurrent.futures.ProcessPoolExecutor(os.cpu_count() or 2, mp_context=context, initializer=_nice)
    _pool["executor"] = executor
    _pool["futures"] = {nodeid: executor.submit(_run, nodeid) for nodeid in _tests}


def started(item):
    return item.nodeid in _pool.get("futures", {})


def outcome(item):
    """What the item's function printed in its worker; raises what it raised."""
    return _pool["futures"][item.nodeid].result()


def stop():
    """Shut the workers down; a session that ends early (-x, Ctrl-C) ends them at once
    rather than wait for tests whose outcome nobody will read."""
    executor = _pool.pop("executor", None)
    if executor is None:
        return
    early = not all(future.done() for future in _pool["futures"].values())
    workers = list((executor._processes or {}).values())  # no public handle before Python 3.14
    executor.shutdown(wait=not early, cancel_futures=True)
    for worker in workers if early else ():
        worker.terminate()


def _nice():
    os.nice(10)


def _run(nodeid):
    function, kwargs = _tests[nodeid]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            function(**kwargs)
    except BaseException as error:
        if printed.getvalue():
            error.add_note(f"printed in the worker:\n{printed.getvalue()}")
        raise
    return printed.getvalue()
