"""What a command's failure prints and returns: one line, `bptt COMMAND: error: ...`, and the README's exit status
(2 bad input, 4 check's forward pass not finite, 3 an OS error, out of memory or a bug, 130 Ctrl-C)."""

import os
import sys

from bptt.app.bench.process import Killed
from bptt.app.files import OutputError
from bptt.app.verify.overflow import NonFiniteForward
from bptt.codegen.backends import MissingFramework
from bptt.derive.model import ModelError
from bptt.derive.refusal import Refusal


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit status 2."""


def guarded(command, work):
    """work()'s exit status, or an error's, reported on one line as `bptt COMMAND: error: ...` (bench's
    measuring process reports its errors so too)."""
    try:
        return work()
    except KeyboardInterrupt:  # Ctrl-C: stop quietly, with the shell's status for SIGINT
        return 130
    except BrokenPipeError:  # the reader stopped early (`bptt latex elman | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (
        UsageError,
        ModelError,
        OutputError,
        Refusal,
        MissingFramework,
    ) as error:  # bad input, or a model the tool cannot handle
        return _failed(command, error, 2)
    except NonFiniteForward as error:  # check: the forward pass overflowed
        return _failed(command, error, 4)
    except Killed as error:  # bench: the measuring process was killed (out of memory, or by a user)
        return _failed(command, error, 3)
    except Exception as error:  # an OS error or a bug: one line, unless debugging
        if os.environ.get("BPTT_DEBUG"):
            raise
        return _failed(command, _describe(error), 3)


def _describe(error):
    """An OS or internal error in words: `path: Permission denied`, `out of memory ...`, or `internal error: ...`."""
    if isinstance(error, OSError) and error.strerror and error.filename:
        return f"{error.filename}: {error.strerror}"
    if isinstance(error, MemoryError):
        return "out of memory: the sizes, steps or batch asked for need more memory than this machine gives"
    named = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return named if isinstance(error, OSError) else f"internal error: {named} (BPTT_DEBUG=1 shows the traceback)"


def _failed(command, error, status):
    """Report error on one line of stderr; the exit status."""
    print(f"bptt {command}: error: {' '.join(str(error).split())}", file=sys.stderr)
    return status
