"""`bptt bench`'s measuring process: `python -m bptt.app.bench.child SPEC` (app/bench/process.py starts it).

The child reports an error as the CLI does (one line, the README's exit status). SIGINT or SIGTERM
stops it quietly with status 130, after the clean-up it owes (write_atomic removes its temporary
file); after the first signal it ignores both, so that a second cannot cut that clean-up short.
It starts with both blocked (the parent blocks them around the fork) and unblocks them once its
handlers are in place, so that one sent while Python starts is handled too, not a traceback.
Nothing imports this module: it imports the CLI (its error reporting) and bench (the measurement).
"""

import signal
import sys

from bptt.app.bench.process import INTERRUPTED, STOPPING

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
        from bptt.app.guard import guarded

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
