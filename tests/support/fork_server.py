"""The processes behind cli_fork.py, run by path (`python -c BOOT THIS_FILE zygote|serve ...`); standard library
only, until a server imports the package its environment names.

- The zygote imports the third-party libraries the CLI and its commands load (SymPy, NumPy, the frameworks), once
  per test process, and forks a server for each environment the tests run `bptt` in, which imports the CLI.
- A server forks a child for each invocation, which runs the entry point `python -m bptt` runs, as
  run_and_exit does: a process of its own, as the user's is, only forked from one that has loaded the CLI.

A server forked from the zygote starts as `python -c` would start in its environment: that environment, sys.path
('' first, then the PYTHONPATH's folders, then the interpreter's), in its folder. The zygote forks one only for an
environment that differs from its own in PYTHONPATH alone (and the test pytest names), and where no folder put
first holds a module the zygote has loaded (a test's stand-in for torch, say): else the client starts a server of
its own (a fresh one).

An invocation's own `python -m bptt.MODULE` children (bench's measuring process) are forked from it likewise, where
a fresh one would start alike (_ForkingPopen); a request with fresh_children starts them fresh."""

import functools
import gc
import importlib
import importlib.machinery
import inspect
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import traceback

BOOT = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
# What the zygote loads: what the CLI loads and what many commands load when they need it (SymPy's simplify
# loads sympy.physics); torch and JAX start no thread on import: safe to fork.
LIBRARIES = ("sympy", "jinja2", "numpy", "sympy.physics.units", "torch", "jax", "jax.numpy")
# The variables a server's environment may differ in from the zygote's: which package it imports, and the test
# pytest names in each test's environment; no library reads them as it loads.
OWN = ("PYTHONPATH", "PYTEST_CURRENT_TEST")


def run_and_exit(call, stdout=None, stderr=None):
    """In a forked child: call() with stdin empty and stdout, stderr written to the files named (None: all three
    inherited); exits as the interpreter would, with 0, a SystemExit's code (a message printed, 1), or 1 and the
    traceback. Never returns."""
    status = 1
    try:
        if stdout is not None:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for fd, path in ((1, stdout), (2, stderr)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        call()
        status = 0
    except SystemExit as exit:
        status = 0 if exit.code is None else exit.code
        if not isinstance(status, int):
            print(status, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(status)


def import_libraries():
    for name in LIBRARIES:
        try:
            importlib.import_module(name)
        except ImportError:  # a framework not installed: its commands say so, as a user's do
            pass


def serve(preload):
    """Read invocations ({args, cwd, stdout, stderr}) from stdin, one JSON line each; fork a child for each that runs
    `python -m bptt ARGS` there; answer its pid, then [its exit status, its CPU seconds]. preload: first load what
    many commands load or compute when they need it: the libraries, the code generators and runtimes (every
    backend), the zoo's models and their modules in every backend (codegen's caches: a derivation and its passes
    once per process, as a notebook's session keeps them; `codegen --check` of the zoo then only prints). Not
    generated/: a test may rewrite a module there."""
    import pkgutil

    import bptt.app.cli  # noqa: F401  the modules every command loads, once
    from bptt.app.start import run

    if preload:
        import_libraries()
        for parent in ("bptt.codegen", "bptt.runtime"):
            for found in pkgutil.walk_packages(importlib.import_module(parent).__path__, parent + "."):
                importlib.import_module(found.name)
        from bptt.codegen.backends import BACKENDS
        from bptt.derive.models import load, names

        for name in names():
            for backend in BACKENDS.values():
                backend.module_source(load(name))
    # Python's collector in a child would visit every object loaded above, copying the pages that hold them (about
    # 0.2 s a child with the frameworks loaded): they are the server's for good.
    gc.freeze()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_and_exit(functools.partial(_invocation, request, run), request["stdout"], request["stderr"])
        print(json.dumps(pid), flush=True)  # the client kills it if it takes too long
        _, wait_status, usage = os.wait4(pid, 0)
        print(json.dumps([os.waitstatus_to_exitcode(wait_status), usage.ru_utime + usage.ru_stime]), flush=True)


def _invocation(request, run):
    os.chdir(request["cwd"])
    if not request.get("fresh_children"):
        subprocess.Popen = _ForkingPopen
    sys.argv = [sys.argv[0], *request["args"]]
    run()


# Popen._execute_child's parameters after (self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env)
_SETTINGS = tuple(inspect.signature(subprocess.Popen._execute_child).parameters)[8:]
_STREAMS = ("p2cread", "p2cwrite", "c2pread", "c2pwrite", "errread", "errwrite")
_DEFAULTS = {"shell": False, "start_new_session": False, "gid": None, "gids": None, "uid": None, "umask": -1}


class _ForkingPopen(subprocess.Popen):
    """Popen that forks `python -m bptt.MODULE ARGS` from this process (an invocation that has loaded the CLI) where
    a fresh one would start alike (_forkable); the child runs the module as `python -m` runs it. Any other command
    is started as Popen starts it."""

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, *settings):
        if not _forkable(args, executable, preexec_fn, pass_fds, cwd, env, dict(zip(_SETTINGS, settings, strict=True))):
            return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env, *settings)
        pid = os.fork()
        if pid == 0:
            run_and_exit(lambda: _run_module(args[2], args[3:]))
        self.pid, self._child_created = pid, True


def _forkable(args, executable, preexec_fn, pass_fds, cwd, env, asked):
    """Whether the command is `python -m bptt.MODULE ...` in this interpreter, this environment and folder, with the
    streams inherited, and nothing else asked of the child (no fds passed, session, group, user or umask)."""
    command = list(args[:2]) == [sys.executable, "-m"] and len(args) > 2 and args[2].startswith("bptt.")
    inherited = all(asked[name] == -1 for name in _STREAMS) and asked.get("process_group", -1) == -1
    defaults = all(asked[name] == value for name, value in _DEFAULTS.items())
    alike = executable is None and preexec_fn is None and not pass_fds and cwd is None and env in (None, os.environ)
    return command and inherited and defaults and alike


def _run_module(name, args):
    """`python -m name args` in a forked child: the signal handlers a fresh interpreter has (the mask inherited,
    as exec keeps it), then the module as __main__."""
    for number in signal.valid_signals():
        if callable(signal.getsignal(number)):
            signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = [name, *args]
    runpy.run_module(name, run_name="__main__", alter_sys=True)


def zygote(channel):
    """Load the libraries, then fork a server for each request ({env, cwd, preload} with the server's stdin and
    stdout) that arrives on channel (a socket), answering its pid, or null where it cannot start one as a fresh
    interpreter would start. Ends when the channel closes."""
    started = dict(os.environ)  # before the libraries, which may set variables of their own
    import_libraries()
    base = _path_without(started.get("PYTHONPATH"))
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 2)
        if not message:
            return
        while _reaped():
            pass
        request = json.loads(message)
        path = base and _path_for(request, started, base)
        pid = os.fork() if path else None
        if pid == 0:
            channel.close()
            _server(request, fds, path)
        for fd in fds:
            os.close(fd)
        channel.send(json.dumps(pid).encode())


def _server(request, fds, path):
    """In the zygote's child: become a server started as `python -c` in the request's environment."""
    status = 1
    try:
        for target, fd in zip((0, 1), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        for name in OWN:  # the only variables that may differ (_path_for)
            os.environ.pop(name, None)
            if name in request["env"]:
                os.environ[name] = request["env"][name]
        sys.path[:] = path
        sys.path_importer_cache.clear()
        importlib.invalidate_caches()
        sys.argv = ["-c"]
        serve(request["preload"])
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        os._exit(status)


def _reaped():
    """Whether a server that ended was waited for (one at a time, without blocking)."""
    try:
        return os.waitpid(-1, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return False


def _entries(pythonpath, cwd):
    """The folders a PYTHONPATH puts on sys.path of an interpreter started in cwd, as it does (absolute)."""
    return [os.path.normpath(os.path.join(cwd, entry)) for entry in (pythonpath or "").split(os.pathsep) if entry]


def _path_without(pythonpath):
    """sys.path after '' without this process's PYTHONPATH's folders (the interpreter's own), or None where they
    are not simply the entries after ''."""
    entries = _entries(pythonpath, os.getcwd())
    if sys.path[0] != "" or sys.path[1 : 1 + len(entries)] != entries:
        return None
    return sys.path[1 + len(entries) :]


def _path_for(request, started, base):
    """sys.path of `python -c` in the request's environment, or None if the zygote cannot be that: an environment
    that differs from the one it started in (started) in more than OWN, or a module it has loaded found first in a
    folder put before the interpreter's."""
    if {**request["env"], **dict.fromkeys(OWN)} != {**started, **dict.fromkeys(OWN)}:
        return None
    entries = _entries(request["env"].get("PYTHONPATH"), request["cwd"])
    loaded = {name.partition(".")[0] for name in sys.modules} - {"__main__"}
    if any(_modules_in(folder) & loaded for folder in (request["cwd"], *entries)):
        return None
    path = [""]
    for entry in (*entries, *base):
        if entry not in path:
            path.append(entry)
    return path


def _modules_in(folder):
    """The names of the modules and regular packages directly in folder."""
    suffixes = importlib.machinery.all_suffixes()
    try:
        found = os.listdir(folder)
    except OSError:
        return set()
    names = {name.partition(".")[0] for name in found if any(name.endswith(suffix) for suffix in suffixes)}
    return names | {name for name in found if os.path.isfile(os.path.join(folder, name, "__init__.py"))}


if __name__ == "__main__":
    if sys.argv[2] == "zygote":
        zygote(socket.socket(fileno=int(sys.argv[3])))
    else:
        serve(sys.argv[3:] == ["preload"])
