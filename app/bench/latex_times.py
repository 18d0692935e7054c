"""The CPU seconds of `bptt latex MODEL -o FILE` for every zoo model, each run in a fresh interpreter as a user
runs it (start-up, imports, the derivation and the document), BLAS and OpenMP on one thread: the promise that a
zoo model's document takes under 3 s of CPU.

    python3 -m bptt.app.bench.latex_times [--repeats N]

Not a test (pytest collects tests/ only): it prints a table of the median, best and worst CPU seconds of that
child alone (its rusage, user + system, from os.wait4), headed by the machine, and exits 1 if a median is 3 s
or more. CPU time, not wall time: on a shared machine the other processes lengthen the wall time, not the CPU's.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from bptt.app.bench.measuring import single_threaded
from bptt.derive.models import names

PROMISE = 3.0  # CPU seconds a zoo model's `bptt latex` stays under


def cpu_seconds(model, path, env):
    """The CPU seconds of `python -m bptt latex MODEL -o PATH` in a fresh interpreter (that child alone)."""
    command = [sys.executable, "-m", "bptt", "latex", model, "-o", path]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    error = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bptt latex {model} failed:\n{error}")
    return usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from bptt.app.bench.machine import processor

    env = single_threaded(os.environ)
    print(f"{processor()}; BLAS and OpenMP on one thread; CPU seconds of a fresh `bptt latex MODEL -o FILE`,")
    print(f"median (best, worst) of {args.repeats} runs, round-robin over the models\n")
    models = names()
    seconds = {model: [] for model in models}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):
            for model in models:
                seconds[model].append(cpu_seconds(model, os.path.join(folder, f"{model}.tex"), env))
    print("| model | CPU s | best | worst |")
    print("|---|---|---|---|")
    for model in models:
        runs = seconds[model]
        print(f"| {model} | {statistics.median(runs):.2f} | {min(runs):.2f} | {max(runs):.2f} |")
    worst = max(models, key=lambda model: statistics.median(seconds[model]))
    median = statistics.median(seconds[worst])
    print(f"\nslowest: {worst}, {median:.2f} s (the promise: under {PROMISE:g} s)")
    if median >= PROMISE:
        sys.exit(1)


if __name__ == "__main__":
    main()
