"""`python -m bptt ARGS` without paying Python's, SymPy's and the CLI's start-up (about a second) each time.

A server process loads the CLI once; for each invocation it forks a child, which changes to the
working folder, writes its stdout and stderr to the files named, runs the entry point `python -m bptt`
runs and exits with its status. Each invocation is a process of its own as the user's is, only forked
from one that has imported the CLI already. Invocations with an environment of their own (a
PYTHONPATH) need a server of their own, started in that environment: support/cli.py keeps one at a time."""

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading

SERVER = r"""
import gc, importlib, json, os, pkgutil, sys, traceback
import bptt.app.cli  # the modules every command loads, once
from bptt.app.start import run

# With "preload": once too, what many commands load or compute when they need it: the code generators and
# runtimes (every backend), the frameworks (torch and JAX start no thread on import: safe to fork), what SymPy's
# simplify loads, the zoo's models (derive.models.load builds each once per process) and their modules in every
# backend (codegen's caches: a derivation and its passes once per process, as a notebook's session keeps them;
# `codegen --check` of the zoo, run a dozen times, then prints only). Not generated/: a test may rewrite a
# module there.
if sys.argv[1:] == ["preload"]:
    for parent in ("bptt.codegen", "bptt.runtime"):
        for found in pkgutil.walk_packages(importlib.import_module(parent).__path__, parent + "."):
            importlib.import_module(found.name)
    from bptt.codegen.backends import BACKENDS
    from bptt.derive.models import load, names

    for name in names():
        for backend in BACKENDS.values():
            backend.module_source(load(name))
    for name in ("torch", "jax", "jax.numpy", "sympy.physics.units"):
        try:
            importlib.import_module(name)
        except ImportError:  # a framework not installed: its commands say so, as a user's do
            pass

# Python's collector in a child would visit every object loaded above, copying the pages that hold them (about
# 0.2 s a child with the frameworks loaded): they are the server's for good.
gc.freeze()
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.chdir(request["cwd"])
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_TRUNC), fd)
            sys.argv = [sys.argv[0], *request["args"]]
            run()
            status = 0
        except SystemExit as exit:  # as the interpreter ends: None is 0, a message is printed and 1
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
    print(json.dumps(pid), flush=True)  # the client kills it if it takes too long
    _, wait_status, usage = os.wait4(pid, 0)
    print(json.dumps([os.waitstatus_to_exitcode(wait_status), usage.ru_utime + usage.ru_stime]), flush=True)
"""


FORKED_CPU = [0.0]  # the CPU seconds of this process's invocations, as their children reported them


class Server:
    """A server process, started on first use (in the folder of that invocation, if started there); a lock makes
    threads take turns. preload: load what many commands load lazily once, for a server that runs many."""

    def __init__(self, preload=True, start_in_cwd=False):
        self.process, self.lock = None, threading.Lock()
        self.options, self.start_in_cwd = ["preload"] if preload else [], start_in_cwd

    def run(self, args, cwd, env, timeout):
        with self.lock, tempfile.TemporaryDirectory() as folder:
            if self.process is None or self.process.poll() is not None:
                self.process = subprocess.Popen(
                    [sys.executable, "-c", SERVER, *self.options],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                    cwd=cwd if self.start_in_cwd else None,
                    bufsize=0,
                )
            paths = {name: os.path.join(folder, name) for name in ("stdout", "stderr")}
            for path in paths.values():
                open(path, "w").close()
            request = {"args": list(args), "cwd": str(cwd), **paths}
            self.process.stdin.write((json.dumps(request) + "\n").encode())
            child = self.answer()
            late = not select.select([self.process.stdout], [], [], timeout)[0]
            if late:
                os.kill(child, signal.SIGKILL)
            status, cpu = self.answer()
            FORKED_CPU[0] += cpu
            if late:
                raise subprocess.TimeoutExpired([sys.executable, "-m", "bptt", *args], timeout)
            out, err = (open(paths[name]).read() for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess([sys.executable, "-m", "bptt", *args], status, out, err)

    def answer(self):
        """The server's next line, read unbuffered (select sees what is not read yet), as JSON."""
        line = b""
        while not line.endswith(b"\n"):
            byte = os.read(self.process.stdout.fileno(), 1)
            if not byte:
                raise RuntimeError("the bptt fork server stopped")
            line += byte
        return json.loads(line)

    def stop(self):
        """End the server (it ends at the end of its input) and wait for it."""
        with self.lock:
            if self.process is not None:
                self.process.stdin.close()
                self.process.wait()
                self.process.stdout.close()
                self.process = None


SERVER_OF_THIS_PROCESS = Server()
