"""How the tests run `bptt` (tests/support/cli.py, cli_fork.py): forked from a server that loaded the CLI, one
server per environment, so that an invocation runs the package its environment names, as a fresh one would."""

import os
import sys

from bptt.app.bench import bench
from bptt.app.bench.measuring import single_threaded
from bptt.tests.support import fork_server
from bptt.tests.support.cli import (
    SERVER_OF_THIS_PROCESS,
    ZYGOTE,
    assert_error,
    assert_ok,
    bptt,
    pythonpath,
    shadow_package,
)


def test_each_environment_runs_its_own_package(tmp_path):
    """`codegen --check linear` reads the generated/ of the package PYTHONPATH names: 0 for a fresh copy, 1 for one
    with a stale linear.py; a server left from another environment would answer for the wrong package."""
    fresh, stale = (shadow_package(tmp_path / name) for name in ("fresh", "stale"))
    (stale / "generated" / "linear.py").write_text("# stale\n", encoding="utf-8")
    for package, status in ((fresh, 0), (stale, 1), (fresh, 0)):
        result = bptt("codegen", "--check", "linear", cwd=tmp_path, env=pythonpath(package.parent))
        assert result.returncode == status, (package, result.stdout, result.stderr)
        assert ("stale: " in result.stdout) == (status == 1), result.stdout


def test_the_server_and_its_zygote_fork_with_one_thread():
    """What the zygote (the frameworks) and the server (the CLI) load before they fork starts no thread: a thread
    would not be copied into the children, and a lock it held would stay locked there."""
    assert_ok(bptt("models"))
    for pid in (ZYGOTE.process.pid, SERVER_OF_THIS_PROCESS.pid):
        assert len(os.listdir(f"/proc/{pid}/task")) == 1


def test_fresh_runs_python_m_bptt():
    result = bptt("models", fresh=True)
    assert_ok(result)
    assert result.args[1:3] == ["-m", "bptt"] and result.stdout == bptt("models").stdout


def test_a_library_hidden_by_pythonpath_is_the_hidden_one(tmp_path):
    """The servers are forked from a process that has loaded torch (cli_fork's zygote): where PYTHONPATH puts a
    stand-in for torch first, a fresh interpreter would import the stand-in, and so does the invocation."""
    stand_in = tmp_path / "hidden" / "torch"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("raise ImportError('a stand-in')\n", encoding="utf-8")
    env = pythonpath(stand_in.parent)
    result = bptt("check", "linear", "--backend", "torch", "--steps", "2", cwd=tmp_path, env=env)
    assert_error(result, 2, "the torch backend needs torch, which is not installed")


def forkable(args, env, cwd=None, **asked):
    """fork_server._forkable of a Popen call with Popen's defaults but for those given."""
    defaults = {**dict.fromkeys(fork_server._SETTINGS), **dict.fromkeys(fork_server._STREAMS, -1)}
    defaults.update(fork_server._DEFAULTS, process_group=-1)
    return fork_server._forkable(args, None, None, (), cwd, env, {**defaults, **asked})


def test_an_invocation_forks_its_python_m_bptt_children_only_where_a_fresh_one_starts_alike():
    """bench's measuring process, in the tests' environment (single-threaded already, as bench asks: the same
    environment), is forked from the invocation; in another environment, with a stream redirected, in another
    folder, a session of its own, or another program, it starts as Popen starts it."""
    command = bench.child_command({"model": "elman"})
    env = single_threaded(os.environ)
    assert env == dict(os.environ) and forkable(command, env) and forkable(command, None)
    assert not forkable(command, {**env, "OMP_NUM_THREADS": "2"})
    assert not forkable(command, env, c2pwrite=5) and not forkable(command, env, cwd="/")
    assert not forkable(command, env, start_new_session=True)
    assert not forkable([sys.executable, "-c", "pass"], env) and not forkable(["python3", *command[1:]], env)
