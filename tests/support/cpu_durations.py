"""CPU seconds per test file, and XLA's share of them: what a test costs on a loaded machine, where wall times
(pytest's --durations) mostly measure the other processes. Loaded by tests/conftest.py; on with --cpu-durations=N,
which prints the N costliest files after the run (with pytest-xdist too: each worker measures its own tests).

A test's CPU time is its process's and its waited-for child processes' (the CLI processes it started itself), and
its CLI runs forked by the fork server (tests/support/cli_fork.py, which reports each child's), over setup, call and
teardown; not the fork servers' own start-up. XLA's is the time JAX spent compiling programs (each eager operation
on a new shape compiles one)."""

import collections
import resource
import time

import pytest

from bptt.tests.support.cli_fork import FORKED_CPU

_XLA = {"programs": 0, "seconds": 0.0}


def cpu_seconds():
    """This process's CPU time, its waited-for children's and its forked CLI runs'."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + FORKED_CPU[0]


def _count_xla_compiles():
    """Wrap JAX's compile step to count its programs and CPU seconds (JAX imported here, before any test runs)."""
    try:
        from jax._src import compiler
    except ImportError:  # no JAX: nothing compiles
        return
    compile_program = compiler.backend_compile_and_load

    def counted(*args, **kwargs):
        start = time.process_time()
        try:
            return compile_program(*args, **kwargs)
        finally:
            _XLA["programs"] += 1
            _XLA["seconds"] += time.process_time() - start

    counted.counted = True
    compiler.backend_compile_and_load = counted


class Measure:
    """The plugin: measures each test where it runs, sums per file where the reports arrive."""

    def __init__(self, shown, runs_tests=True):
        self.shown = shown
        if runs_tests:  # not pytest-xdist's controller, which only sums the workers' reports
            _count_xla_compiles()
        self.files = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])  # tests, CPU s, XLA s, XLA programs

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cpu, programs, xla = cpu_seconds(), _XLA["programs"], _XLA["seconds"]
        item.user_properties.append(("cpu_start", (cpu, programs, xla)))
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if call.when == "teardown":
            cpu, programs, xla = dict(item.user_properties)["cpu_start"]
            spent = (cpu_seconds() - cpu, _XLA["programs"] - programs, _XLA["seconds"] - xla)
            report.user_properties.append(("cpu_spent", spent))
        return report

    def pytest_runtest_logreport(self, report):
        spent = dict(report.user_properties).get("cpu_spent")
        if report.when == "teardown" and spent is not None:
            row = self.files[report.nodeid.split("::")[0]]
            row[0] += 1
            row[1] += spent[0]
            row[3] += spent[1]
            row[2] += spent[2]

    def pytest_terminal_summary(self, terminalreporter):
        rows = sorted(self.files.items(), key=lambda item: -item[1][1])
        total = sum(row[1] for _, row in rows)
        xla = sum(row[2] for _, row in rows)
        terminalreporter.section(f"CPU seconds per file ({len(rows)} files, {total:.0f} s, XLA {xla:.0f} s)")
        for path, (tests, cpu, compiling, programs) in rows[: self.shown]:
            terminalreporter.write_line(
                f"{cpu:8.1f} s {tests:5d} tests   XLA {compiling:6.1f} s {programs:5d} programs   {path}"
            )
