"""`python -m bptt ARGS` without paying Python's, SymPy's, the frameworks' and the CLI's start-up (seconds) each time.

A server process loads the CLI once; for each invocation it forks a child, which changes to the working folder,
writes its stdout and stderr to the files named, runs the entry point `python -m bptt` runs and exits with its
status. Each invocation is a process of its own as the user's is, only forked from one that has imported the CLI
already. Invocations with an environment of their own (a PYTHONPATH) need a server of their own, started in that
environment: support/cli.py keeps one at a time. The servers are forked from this process's zygote, which has
loaded the third-party libraries once, where that is the same as starting one fresh (fork_server.py); else
started fresh."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from bptt.tests.support import fork_server

FORKED_CPU = [0.0]  # the CPU seconds of this process's invocations, as their children reported them


class Zygote:
    """This process's zygote (fork_server.zygote), started on first use in environment() (the tests' own)."""

    def __init__(self, environment):
        self.environment, self.process, self.channel, self.lock = environment, None, None, threading.Lock()

    def server(self, env, cwd, preload):
        """(pid, its stdin, its stdout) of a server forked for env, started in cwd; None if the zygote cannot be one
        started fresh there."""
        with self.lock:
            if self.process is None:
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                command = [sys.executable, "-c", fork_server.BOOT, fork_server.__file__, "zygote", str(theirs.fileno())]
                self.process = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, env=self.environment(), pass_fds=[theirs.fileno()]
                )
                theirs.close()
                self.channel = ours
            (stdin, to_server), (from_server, stdout) = os.pipe(), os.pipe()
            request = {"env": env, "cwd": str(cwd), "preload": preload}
            socket.send_fds(self.channel, [json.dumps(request).encode()], [stdin, stdout])
            os.close(stdin)
            os.close(stdout)
            pid = json.loads(self.channel.recv(1 << 10))
        if pid is None:
            os.close(to_server)
            os.close(from_server)
            return None
        return pid, to_server, from_server


class Server:
    """A server process, started on first use (in the folder of that invocation, if started there); a lock makes
    threads take turns. preload: load what many commands load lazily once, for a server that runs many."""

    def __init__(self, zygote, preload=True, start_in_cwd=False):
        self.pid, self.fresh, self.lock = None, None, threading.Lock()
        self.zygote, self.preload, self.start_in_cwd = zygote, preload, start_in_cwd

    def start(self, cwd, env):
        """Fork the server from the zygote, or where it cannot, start one fresh."""
        cwd = cwd if self.start_in_cwd else os.getcwd()
        forked = self.zygote.server(env, cwd, self.preload)
        if forked is not None:
            self.pid, to_server, from_server = forked
            self.to_server, self.from_server = os.fdopen(to_server, "wb", 0), os.fdopen(from_server, "rb", 0)
            return
        command = [sys.executable, "-c", fork_server.BOOT, fork_server.__file__, "serve"]
        self.fresh = subprocess.Popen(
            command + (["preload"] if self.preload else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=cwd,
            bufsize=0,
        )
        self.pid, self.to_server, self.from_server = self.fresh.pid, self.fresh.stdin, self.fresh.stdout

    def run(self, args, cwd, env, timeout, fresh_children=False):
        """The invocation's CompletedProcess; its `python -m bptt.MODULE` children forked from it unless
        fresh_children (fork_server._ForkingPopen)."""
        with self.lock, tempfile.TemporaryDirectory() as folder:
            if self.pid is None:
                self.start(cwd, env)
            paths = {name: os.path.join(folder, name) for name in ("stdout", "stderr")}
            request = {"args": list(args), "cwd": str(cwd), **paths, "fresh_children": fresh_children}
            self.to_server.write((json.dumps(request) + "\n").encode())
            child = self.answer()
            late = not select.select([self.from_server], [], [], timeout)[0]
            if late:
                os.kill(child, signal.SIGKILL)
            status, cpu = self.answer()
            FORKED_CPU[0] += cpu
            if late:
                raise subprocess.TimeoutExpired([sys.executable, "-m", "bptt", *args], timeout)
            out, err = (open(paths[name]).read() for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess([sys.executable, "-m", "bptt", *args], status, out, err)

    def answer(self):
        """The server's next line, read unbuffered (select sees what is not read yet), as JSON; a server that
        stopped is forgotten (the next invocation starts another)."""
        line = b""
        while not line.endswith(b"\n"):
            byte = os.read(self.from_server.fileno(), 1)
            if not byte:
                self.stopped()
                raise RuntimeError("the bptt fork server stopped")
            line += byte
        return json.loads(line)

    def stop(self):
        """End the server (it ends at the end of its input) and wait for it to close its output."""
        with self.lock:
            if self.pid is not None:
                self.to_server.close()
                while self.from_server.read(1 << 16):
                    pass
                self.stopped()

    def stopped(self):
        """Forget the server, which has ended (a fresh one waited for; the zygote waits for the others)."""
        self.to_server.close()
        self.from_server.close()
        if self.fresh is not None:
            self.fresh.wait()
        self.pid, self.fresh = None, None
