"""Output files: the checks on a path the tool will write, and writing it atomically."""

import errno
import glob
import os
import pathlib
import stat
import tempfile

TEMPORARY = ".tmp"  # the suffix of the file write_atomic writes before renaming it


def _default_mode():
    """The permissions a new file gets under the current umask (0o644 for umask 022)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


class OutputError(ValueError):
    """An output path the tool will not write (a device, a FIFO, a folder...): a usage error."""


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_BAD_PATH = (errno.ELOOP, errno.ENOTDIR, errno.ENAMETOOLONG)


def output_target(path):
    """The regular file that writing `path` replaces: path itself, or the final target of its symlinks.

    A missing file (or the missing target of a dangling symlink) is created if its folder exists.
    Anything else raises OutputError naming `path` as given; nothing is touched."""
    if str(path) == "":
        raise OutputError("the output file name is empty")
    if str(path).endswith(os.sep):
        raise OutputError(f"{path} names a folder, not a file")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        if error.errno in _BAD_PATH:
            raise OutputError(f"{path}: {error.strerror}") from None
        raise
    if mode is not None and not stat.S_ISREG(mode):
        kind = next((name for is_kind, name in _KINDS if is_kind(mode)), "a special file")
        raise OutputError(f"{path} is {kind}, not a regular file: refusing to replace it")
    target = pathlib.Path(os.path.realpath(path))
    if not target.parent.is_dir():
        raise OutputError(f"{path}: the folder {str(target.parent)!r} does not exist")
    return target


def output_folder(path, option):
    """path as a Path: a folder, or nothing yet in an existing folder (the writer makes it, as mkdir would);
    else OutputError, one line naming the option. Nothing is made here."""
    if str(path) == "":
        raise OutputError(f"{option}: the output folder name is empty")
    folder = pathlib.Path(path)
    if folder.is_dir():
        return folder
    if folder.exists() or folder.is_symlink():
        raise OutputError(f"{option}: {str(path)!r} is not a folder")
    parent = pathlib.Path(os.path.abspath(folder)).parent
    if not parent.is_dir():
        raise OutputError(
            f"{option}: output folder {str(path)!r} does not exist, "
            f"nor does its parent {str(folder.parent)!r} to make it in"
        )
    return folder


def writable_folder(path, option):
    """output_folder(path, option), where a file can be made now: in the folder, or in the parent it is to be
    made in (a probe, made and removed at once, asks the system itself: permissions, a read-only mount, an
    immutable folder); else the OSError, naming path as given. Nothing is left."""
    folder = output_folder(path, option)
    where = folder if folder.is_dir() else pathlib.Path(os.path.abspath(folder)).parent
    try:
        handle, probe = tempfile.mkstemp(dir=where, prefix=".bptt-probe.", suffix=TEMPORARY)
    except OSError as error:
        raise _naming(error, path) from None
    os.close(handle)
    os.unlink(probe)
    return folder


def _temporary_prefix(target):
    return f".{target.name}."


def leftovers(path):
    """The temporary files write_atomic(path, ...) leaves beside path's target if its process is killed."""
    target = pathlib.Path(os.path.realpath(path))
    return sorted(target.parent.glob(f"{glob.escape(_temporary_prefix(target))}*{TEMPORARY}"))


def write_atomic(path, data):
    """Write data (text, or bytes) to path, through its symlinks, so that readers see the old file or the new
    one, never half. The new file is made beside the final target and renamed over it; an OSError names
    `path` as given."""
    target = output_target(path)
    try:
        handle, tmp = tempfile.mkstemp(dir=target.parent, prefix=_temporary_prefix(target), suffix=TEMPORARY)
    except OSError as error:
        raise _naming(error, path) from None
    try:
        binary = isinstance(data, bytes)
        with os.fdopen(handle, "wb") if binary else os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(data)
        os.chmod(tmp, target.stat().st_mode & 0o777 if target.exists() else _default_mode())
        os.replace(tmp, target)
    except BaseException as error:
        pathlib.Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _naming(error, path) from None
        raise


def _naming(error, path):
    """The same error about the user's path rather than a temporary file (OSError picks the subclass from errno)."""
    return OSError(error.errno, error.strerror, str(path)) if error.errno else error
