"""Running `bptt` as a user runs it, in a process of its own: helpers shared by the CLI tests."""

import concurrent.futures
import functools
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

from bptt.derive.models import names
from bptt.tests.support.cli_fork import Server, Zygote

REPO = pathlib.Path(__file__).resolve().parents[2]
GENERATED = REPO / "generated"
ZOO = tuple(names())  # elman, linear, and any model added to the zoo
# What `bptt check` must report for each zoo model: every parameter and the initial state.
ROWS = {"linear": ("W_hx", "W_hh", "W_qh", "h0"), "elman": ("U", "W", "V", "b", "c", "h0")}

# A user's model: derive/models/elman.py with a sigmoid activation and another name.
USER_MODELS = textwrap.dedent(
    '''
    """Models a user writes outside the zoo."""

    from bptt.derive.model import Model, labels, matrix, sequence, sizes, vector
    from bptt.derive.nodes import Softmax, SoftmaxCrossEntropy, sigmoid, t


    def make(name):
        d, h, q = sizes("d h q")
        U, W, V = matrix("U", h, d), matrix("W", h, h), matrix("V", q, h)
        b, c = vector("b", h), vector("c", q)
        x, a, hidden = sequence("x", d, "input"), sequence("a", h, "intermediate"), sequence("h", h, "state")
        s, o, y = sequence("s", q, "output"), sequence("o", q, "intermediate"), labels("y", q)
        return Model(
            name=name,
            title="Elman RNN with a sigmoid activation",
            source="a test of user models",
            sizes=(d, h, q),
            params=(U, W, V, b, c),
            inputs=(x,),
            steps=((a, b + W * hidden(t - 1) + U * x()), (hidden, sigmoid(a()))),
            outputs=((s, c + V * hidden()),),
            loss=SoftmaxCrossEntropy(s(), y()),
            names=((o, Softmax(s())),),
        )


    def sigmoid_rnn():
        return make("sigmoid-rnn")


    def named_linear():
        return make("linear")


    def escaping():
        return make("../escaped")
    '''
)

# A model reading the input x at t-1: only states may be read at t-1.
READS_INPUT_AT_T_MINUS_1 = textwrap.dedent(
    """
    from bptt.derive.model import Model, matrix, sequence, sizes
    from bptt.derive.nodes import GenericLoss, t


    def f():
        d, h, q = sizes("d h q")
        W_hx, W_hh, W_qh = matrix("W_hx", h, d), matrix("W_hh", h, h), matrix("W_qh", q, h)
        x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
        o, y = sequence("o", q, "output"), sequence("y", q, "target")
        return Model(
            name="late",
            title="Reads x at t-1",
            source="a test",
            sizes=(d, h, q),
            params=(W_hx, W_hh, W_qh),
            inputs=(x,),
            steps=((hidden, W_hx * x(t - 1) + W_hh * hidden(t - 1)),),
            outputs=((o, W_qh * hidden()),),
            loss=GenericLoss(o(), y()),
        )
    """
)

# A model with an elementwise function that has no derivative rule.
UNKNOWN_FUNCTION = READS_INPUT_AT_T_MINUS_1.replace("GenericLoss, t", "Apply, GenericLoss, t").replace(
    "W_hx * x(t - 1) + W_hh * hidden(t - 1)", 'Apply("swish", W_hx * x() + W_hh * hidden(t - 1))'
)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "BPTT_DEBUG"}  # BPTT_DEBUG turns errors into tracebacks
    env.update(extra)
    return env


ZYGOTE = Zygote(clean_env)  # the servers' parent, started in the tests' environment
SERVER_OF_THIS_PROCESS = Server(ZYGOTE)


def bptt(*args, cwd=REPO, env=None, timeout=300, fresh=False, fresh_children=False):
    """Run `python -m bptt ARGS`: forked from a process that has loaded the CLI (cli_fork), one started in env if
    env differs from the tests' clean_env(), its `python -m bptt.MODULE` children forked from it unless
    fresh_children; fresh: in an interpreter of its own, started as `python -m bptt`, its children too."""
    if fresh:
        command = [sys.executable, "-m", "bptt", *map(str, args)]
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    server = SERVER_OF_THIS_PROCESS if env is None or env == clean_env() else _server_in(env, cwd)
    return server.run(tuple(map(str, args)), cwd, clean_env() if env is None else env, timeout, fresh_children)


_OWN_SERVER = {}  # {environment: its server}: one at a time, the last environment of its own a test used


def _server_in(env, cwd):
    """The server for invocations in env (started in cwd, as `python -m bptt` would start there), the previous
    one stopped. It loads nothing beyond the CLI: a few invocations share it."""
    key = tuple(sorted(env.items()))
    if key not in _OWN_SERVER:
        for server in _OWN_SERVER.values():
            server.stop()
        _OWN_SERVER.clear()
        _OWN_SERVER[key] = Server(ZYGOTE, preload=False, start_in_cwd=True)
    return _OWN_SERVER[key]


@functools.cache
def cached(*args):
    """bptt(*args) for invocations that depend on nothing but the repository, run once per session."""
    return bptt(*args)


def run_all(invocations):
    """{args: bptt(*args)} for many invocations, run side by side to use every core."""
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return dict(zip(invocations, pool.map(lambda args: bptt(*args), invocations), strict=True))


def load_file(path, name):
    """The Python module at path, loaded in this process under name (one no other module has)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr


def assert_error(result, status, *fragments):
    """Exit `status` with one line on stderr, `bptt ...: error: ...`, naming the fragments; no traceback."""
    assert result.returncode == status, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stderr.endswith("\n"), f"not one line: {result.stderr!r}"
    assert re.match(r"bptt( \w+)?: error: ", result.stderr), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, f"{fragment!r} not in {result.stderr!r}"


def assert_user_error(result, *fragments):
    """Exit 2, one readable line on stderr naming the fragments, nothing on stdout, no traceback."""
    assert_error(result, 2, *fragments)
    assert result.stdout == ""


def shadow_package(root):
    """root/bptt: the repository's package with a copy of generated/ of its own, imported with PYTHONPATH=root.

    Its code folders are symlinks into the repository; like an installed bptt, it has no pyproject.toml."""
    package = root / "bptt"
    package.mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "notebook.py", "derive", "documents", "codegen", "app", "runtime"):
        (package / name).symlink_to(REPO / name)
    shutil.copytree(GENERATED, package / "generated", ignore=shutil.ignore_patterns("__pycache__"))
    return package


def pythonpath(*folders):
    """An environment whose PYTHONPATH puts folders first."""
    return clean_env(PYTHONPATH=os.pathsep.join(filter(None, [*map(str, folders), os.environ.get("PYTHONPATH")])))


def table_rows(stdout):
    """{first word: whole line} for the lines of a `bptt check` table."""
    return {line.split()[0]: line for line in stdout.splitlines() if line.strip()}


def assert_all_rows_ok(stdout, names):
    rows = table_rows(stdout)
    assert "parameter" in rows, stdout  # the header
    for name in names:
        assert name in rows, f"no row for {name}:\n{stdout}"
        assert " ok" in rows[name] and "FAIL" not in rows[name], rows[name]
    assert "FAIL" not in stdout
