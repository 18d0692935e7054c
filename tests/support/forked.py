"""Processes forked from the test's own: each a real process of its own, started without paying for Python's and
the frameworks' imports again (torch's takes about 2 CPU-s a process)."""

import gc
import os
import signal
import sys
import tempfile
import time

from bptt.tests.support.fork_server import run_and_exit


def side_by_side(calls, timeout):
    """[(exit status, stderr)] of each call() run in a process of its own, forked from this one, all at once (as
    processes that wait for each other must run). A call that raises exits 1 with its traceback on stderr; one
    still running after timeout seconds is killed (status -9)."""
    with tempfile.TemporaryDirectory() as folder:
        paths = [os.path.join(folder, f"{n}.stderr") for n in range(len(calls))]
        pids = [_fork(call, path) for call, path in zip(calls, paths, strict=True)]
        statuses = _waited(pids, time.monotonic() + timeout)
        return [(status, open(path).read()) for status, path in zip(statuses, paths, strict=True)]


def _fork(call, stderr_path):
    """The pid of a child that runs call() with stdin empty and stderr in stderr_path (fork_server.run_and_exit)."""
    pid = os.fork()
    if pid == 0:
        run_and_exit(lambda: _in_child(call), os.devnull, stderr_path)
    return pid


def _in_child(call):
    gc.freeze()  # the test process's objects are not the child's to collect (it would copy their pages)
    sys.stdout, sys.stderr = (open(fd, "w", closefd=False) for fd in (1, 2))  # not pytest's captures
    call()


def _waited(pids, deadline):
    """The exit statuses of pids, each killed if still running at deadline."""
    statuses = {}
    while len(statuses) < len(pids):
        for pid in pids:
            if pid not in statuses:
                done, wait_status = os.waitpid(pid, os.WNOHANG)
                if done:
                    statuses[pid] = os.waitstatus_to_exitcode(wait_status)
                elif time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    return [statuses[pid] for pid in pids]
