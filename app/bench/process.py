"""`bptt bench`'s measuring process (`python -m bptt.app.bench.process SPEC`), and how the CLI runs it.

The child reports an error as the CLI does (one line, the README's exit status). SIGINT or SIGTERM
stops it quietly with status 130, after the clean-up it owes (write_atomic removes its temporary
file); from the first signal on, it ignores both, so that a second cannot cut that clean-up short.
The parent, interrupted, asks the child to stop (SIGTERM), waits STOP_SECONDS, then kills it, and
removes the temporary files of the outputs that a child ended by a signal could not remove.
"""

import signal
import subprocess
import sys

STOP_SECONDS = 10  # how long an interrupted parent waits for the child's clean-up before killing it
INTERRUPTED = 130  # the shell's status for SIGINT
STOPPING = (signal.SIGINT, signal.SIGTERM)


class Killed(Exception):
    """The measuring process was ended by a signal it cannot handle (SIGKILL: out of memory, or a user)."""


def run(command, env, outputs=()):
    """Run command (the child) to its end; its exit status, INTERRUPTED if either process was interrupted.
    outputs: the files the child may be writing, whose temporaries are removed if it ended by a signal."""
    child = subprocess.Popen(command, env=env)
    try:
        status = child.wait()
    except KeyboardInterrupt:  # the parent was: the child too, if the terminal signalled the process group
        _stop(child)
        status = INTERRUPTED
    if child.returncode < 0:
        from bptt.app.files import leftovers

        for path in outputs:
            for leftover in leftovers(path):
                leftover.unlink(missing_ok=True)
    if -status in STOPPING:
        return INTERRUPTED
    if status < 0:
        name = signal.Signals(-status).name
        raise Killed(f"the measuring process was ended by {name} (out of memory, or killed by a user)")
    return status


def _stop(child):
    """End the child: SIGTERM, then SIGKILL if it has not ended in STOP_SECONDS. Ctrl-C is ignored meanwhile."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child.terminate()
        try:
            child.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted(signum, frame):
    """The child's handler of SIGINT and SIGTERM: ignore both from now on, and unwind (clean-ups run)."""
    for number in STOPPING:
        signal.signal(number, signal.SIG_IGN)
    raise KeyboardInterrupt


def serve(argv):
    """The child's run: bench.main(argv) under the CLI's error reporting; its exit status."""
    try:
        from bptt.app.bench import bench
        from bptt.app.cli import guarded

        status = guarded("bench", lambda: bench.main(argv))
        for number in STOPPING:  # a signal now has nothing left to stop
            signal.signal(number, signal.SIG_IGN)
    except KeyboardInterrupt:  # while loading, or between the measurement's end and the line above
        status = INTERRUPTED
    return status


if __name__ == "__main__":
    for number in STOPPING:
        signal.signal(number, _interrupted)
    sys.exit(serve(sys.argv[1:]))
