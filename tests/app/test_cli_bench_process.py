"""`bptt bench` measures in a child process (app/bench/child.py, started by app/bench/process.py): its errors
are one line with the README's exit status (2 usage, 3 the OS or out of memory), checked before measuring where
they can be; Ctrl-C, to the `bptt` process, to the child or to both, exits 130 quietly and leaves no temporary
file in -o's folder."""

import contextlib
import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from bptt.app import cli, memory
from bptt.app.bench import bench, process
from bptt.tests.support.cli import REPO, assert_error, bptt, clean_env

SMALL = ("--steps", "20", "--batch", "2", "--sizes", "d=2,h=3,q=4", "--dtype", "float64", "--repeats", "1")
UNWRITABLE = "/sys/kernel"  # sysfs: a folder that refuses new files and folders, even to root


def never_measured(monkeypatch):
    monkeypatch.setattr(bench, "launch", lambda spec: pytest.fail("bench measured after a bad argument"))


@pytest.mark.parametrize(
    ("args", "status", "fragment"),
    [
        (("--checkpoints", "4,16B"), 2, "--checkpoints: checkpoints='16B' holds no step"),
        (("--checkpoints", "4", "-o", UNWRITABLE), 3, f"{UNWRITABLE}: "),
        (("--checkpoints", "4", "-o", f"{UNWRITABLE}/new"), 3, f"{UNWRITABLE}/new: "),
    ],
    ids=["budget too small for a step", "-o unwritable", "-o new in unwritable"],
)
def test_a_bad_budget_or_folder_is_one_line_before_measuring(args, status, fragment, monkeypatch, capsys):
    never_measured(monkeypatch)
    assert cli.main(["bench", "elman", *SMALL, *args]) == status
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"bptt bench: error: {fragment}") and err.count("\n") == 1, err
    assert not os.path.exists(f"{UNWRITABLE}/new")


def as_nobody(call):
    """(what call() returns, what it wrote to stderr), run in a forked process without root's powers (uid and
    gid 65534 when the suite runs as root, as CI does), so that a folder's permissions are enforced. What
    call() imports must be imported already: the unprivileged user may not read root's site-packages."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, call, send the answer, never return into pytest
        try:
            os.close(read)
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                result = call()
            os.write(write, json.dumps([result, err.getvalue()]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        data = answer.read()
    os.waitpid(pid, 0)
    assert data, "the unprivileged call raised"
    return json.loads(data)


@pytest.mark.parametrize("new", [False, True], ids=["folder", "new folder inside"])
def test_a_folder_without_write_permission_is_refused_before_measuring(new, monkeypatch):
    top = tempfile.mkdtemp()
    try:
        os.chmod(top, 0o755)  # reachable by the unprivileged user; the folder inside is not writable
        locked = os.path.join(top, "locked")
        os.mkdir(locked, mode=0o555)
        writable = os.path.join(top, "writable")
        monkeypatch.setattr(bench, "launch", lambda spec: 0)
        assert cli.main(["bench", "elman", *SMALL, "--checkpoints", "4", "-o", writable]) == 0  # imports, as root
        never_measured(monkeypatch)
        target = os.path.join(locked, "new") if new else locked
        status, err = as_nobody(lambda: cli.main(["bench", "elman", *SMALL, "--checkpoints", "4", "-o", target]))
        assert status == 3 and err == f"bptt bench: error: {target}: {os.strerror(errno.EACCES)}\n", err
        assert os.listdir(locked) == []
    finally:
        shutil.rmtree(top)


def test_the_child_s_errors_are_one_line_with_the_readmes_status(tmp_path, monkeypatch, capfd):
    """The child's own errors (here: the parameters take 800 TB) are reported as the CLI reports them. The parent
    refuses such sizes before it starts a child (app/memory.py): here it is made to know no memory, so that the
    child tries."""
    huge = ["--sizes", "d=1,h=10000000,q=1", "--steps", "2", "--batch", "1", "--repeats", "1", "--dtype", "float64"]
    assert_error(bptt("bench", "elman", *huge), 2, "bptt bench: error: T=2, B=1, d=1, h=10000000, q=1: ")
    monkeypatch.setattr(memory, "available", lambda: None)
    for extra in ([], ["--checkpoints", "4", "-o", str(tmp_path)]):
        assert cli.main(["bench", "elman", *huge, *extra]) == 3
        err = capfd.readouterr().err  # the child's, on this process's stderr
        assert err.startswith("bptt bench: error: out of memory: ") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- a child the parent must kill, in this process

STAND_IN = """
import os, signal, sys, time
for number in (signal.SIGINT, signal.SIGTERM):
    signal.signal(number, signal.SIG_IGN)  # stuck: only SIGKILL ends it
folder = sys.argv[1]
open(os.path.join(folder, ".checkpoints.png.x1y2z3.tmp"), "wb").close()  # as write_atomic, mid-write
open(os.path.join(folder, "started"), "w").close()
if sys.argv[2] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(600)
"""


def stand_in(monkeypatch, folder, how):
    """bench's child replaced by one that leaves a temporary file in folder, then waits for SIGKILL (how:
    "stuck") or sends it to itself ("killed", as the kernel's out-of-memory killer would)."""
    monkeypatch.setattr(bench, "child_command", lambda spec: [sys.executable, "-c", STAND_IN, str(folder), how])
    monkeypatch.setattr(process, "STOP_SECONDS", 0.5)  # it ignores SIGTERM anyway


def test_ctrl_c_to_bench_kills_a_stuck_child_and_removes_its_temporary_file(tmp_path, monkeypatch):
    """Ctrl-C to the `bptt` process alone, its child mid-write and deaf to SIGTERM: it is killed after
    STOP_SECONDS, reaped, and its temporary file removed; the status is 130, not a KeyboardInterrupt."""
    stand_in(monkeypatch, tmp_path, "stuck")
    main = threading.main_thread().ident
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as `bptt` has it; restored below

    def interrupt_once_started():
        while not (tmp_path / "started").exists():
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGINT)  # Ctrl-C to the `bptt` process alone

    thread = threading.Thread(target=interrupt_once_started, daemon=True)
    thread.start()
    try:
        status = bench.launch({"output": str(tmp_path)})
    except KeyboardInterrupt:
        status = "KeyboardInterrupt"
    finally:
        signal.signal(signal.SIGINT, previous)
    thread.join()
    assert status == 130
    assert sorted(path.name for path in tmp_path.iterdir()) == ["started"]


def test_a_killed_child_is_one_line_exit_3_and_leaves_no_temporary_file(tmp_path, monkeypatch, capsys):
    stand_in(monkeypatch, tmp_path, "killed")
    assert cli.main(["bench", "elman", *SMALL, "--checkpoints", "4", "-o", str(tmp_path)]) == 3
    assert capsys.readouterr().err == (
        "bptt bench: error: the measuring process was ended by SIGKILL (out of memory, or killed by a user)\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["started"]


# ---------------------------------------------------------------- Ctrl-C to real processes


def children(pid):
    try:
        return [int(child) for child in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def measuring(pid):
    """Whether the process has loaded NumPy: bench's child, past its start-up, loading what it measures."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            return any("_multiarray_umath" in line for line in maps)
    except OSError:
        return False


def interrupted(whom, folder, repeats):
    """(exit status, stderr, the child's pid) of `bptt bench --checkpoints 4,8 -o folder`, sent SIGINT (whom:
    the `bptt` process, its child, or both as a terminal's Ctrl-C) once the child has loaded NumPy; None if
    it finished first (a starved test process can miss the moment)."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bptt",
            "bench",
            "elman",
            *SMALL[:-1],
            str(repeats),
            "--checkpoints",
            "4,8",
            "-o",
            folder,
        ],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a process group of its own, as a shell gives a command
    )
    deadline = time.monotonic() + 120
    while parent.poll() is None and not any(map(measuring, children(parent.pid))):
        assert time.monotonic() < deadline, "bench's child never started"
        time.sleep(0.005)
    (child,) = children(parent.pid) or [None]
    if parent.poll() is not None or child is None:
        parent.communicate()
        return None
    {"parent": lambda: os.kill(parent.pid, signal.SIGINT),
     "child": lambda: os.kill(child, signal.SIGINT),
     "group": lambda: os.killpg(parent.pid, signal.SIGINT)}[whom]()  # fmt: skip
    _, err = parent.communicate(timeout=120)
    return None if parent.returncode == 0 else (parent.returncode, err.decode(), child)


@pytest.mark.parametrize("whom", ["parent", "child", "group"])
def test_ctrl_c_during_bench_exits_130_quietly_leaving_no_temporary_file(whom, tmp_path):
    result = next(filter(None, (interrupted(whom, tmp_path, 10**k) for k in range(3))), None)
    assert result is not None, "bench finished three times before it could be interrupted"
    status, err, child = result
    assert (status, err) == (130, "")
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".tmp")] == []
    assert not os.path.exists(f"/proc/{child}")  # ended and reaped: no child left running
