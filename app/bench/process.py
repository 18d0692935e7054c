"""`bptt bench`'s measuring process (`python -m bptt.app.bench.process SPEC`), and how the CLI runs it.

The child reports an error as the CLI does (one line, the README's exit status). SIGINT or SIGTERM
stops it quietly with status 130, after the clean-up it owes (write_atomic removes its temporary
file); after the first signal it ignores both, so that a second cannot cut that clean-up short.
It starts with both blocked (the parent blocks them around the fork) and unblocks them once its
handlers are in place, so that one sent while Python starts is handled too, not a traceback.
The parent records a Ctrl-C rather than raising it, so that wherever it comes (even while the child
is being started) the parent asks the child to stop (SIGTERM), waits STOP_SECONDS, then kills it,
reaps it, and removes the temporary files of the outputs that a child ended by a signal left.
"""

import signal
import subprocess
import sys
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


_stopped = []  # the signal that stops the child once received, or "finished": later signals are ignored


def _interrupted(signum, frame):
    """The child's handler of SIGINT and SIGTERM: unwind (clean-ups run) at the first, ignore the others.
    (Left in place, not SIG_IGN: a second signal already caught would then be reported as a race.)"""
    if not _stopped:
        _stopped.append(signum)
        raise KeyboardInterrupt


def serve(argv):
    """The child's run: bench.main(argv) under the CLI's error reporting; its exit status. Once signalled,
    any error is the interruption's (C code, NumPy's import for one, may turn it into an ImportError)."""

    def measure():
        try:
            return bench.main(argv)
        except Exception:
            if _stopped:
                raise KeyboardInterrupt from None
            raise

    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)  # blocked since the fork: one sent meanwhile comes now
        from bptt.app.bench import bench
        from bptt.app.cli import guarded

        status = guarded("bench", measure)
        _stopped.append("finished")  # a signal now has nothing left to stop
    except BaseException:  # while loading, or between the measurement's end and the line above
        if not _stopped:
            raise
        status = INTERRUPTED
    return status


if __name__ == "__main__":
    for number in STOPPING:
        signal.signal(number, _interrupted)
    sys.exit(serve(sys.argv[1:]))
