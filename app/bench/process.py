"""How the CLI runs `bptt bench`'s measuring process (app/bench/child.py, `python -m bptt.app.bench.child SPEC`).

The parent blocks SIGINT and SIGTERM around the fork (the child unblocks them once its handlers are in place).
The parent records a Ctrl-C rather than raising it, so that wherever it comes (even while the child
is being started) the parent asks the child to stop (SIGTERM), waits STOP_SECONDS, then kills it,
reaps it, and removes the temporary files of the outputs that a child ended by a signal left.
"""

import signal
import subprocess
import time

STOP_SECONDS = 10  # how long an interrupted parent waits for the child's clean-up before killing it
POLL_SECONDS = 0.1  # how often the parent looks whether it was interrupted
INTERRUPTED = 130  # the shell's status for SIGINT
STOPPING = (signal.SIGINT, signal.SIGTERM)


class Killed(Exception):
    """The measuring process was ended by a signal it cannot handle (SIGKILL: out of memory, or a user)."""


def run(command, env, outputs=()):
    """Run command (the child) to its end; its exit status, INTERRUPTED if either process was interrupted.
    outputs: the files the child may be writing, whose temporaries are removed if it ended by a signal.
    Call it from the main thread: a Ctrl-C meanwhile is recorded (never raised) and ends the child."""
    interrupted = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: interrupted.append(number))
    try:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)  # inherited by the child: see serve
        try:
            child = subprocess.Popen(command, env=env)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _wait(child, interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)
    if child.returncode < 0:
        from bptt.app.files import leftovers

        for path in outputs:
            for leftover in leftovers(path):
                leftover.unlink(missing_ok=True)
    if interrupted or -child.returncode in STOPPING:
        return INTERRUPTED
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        raise Killed(f"the measuring process was ended by {name} (out of memory, or killed by a user)")
    return child.returncode


def _wait(child, interrupted):
    """Wait for the child; once interrupted, SIGTERM it, and SIGKILL it if it has not ended in STOP_SECONDS."""
    deadline = None
    while child.poll() is None:
        if interrupted and deadline is None:
            child.terminate()
            deadline = time.monotonic() + STOP_SECONDS
        elif deadline is not None and time.monotonic() > deadline:
            child.kill()
        try:
            child.wait(POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
