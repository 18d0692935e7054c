"""The share of a loss_and_grads call its argument checks take, at every configuration of the README's speed
table, for the NumPy and torch modules: each check function the module and its runtime call is timed where
it runs (the outermost call only, so a check calling another counts once), on one pinned core with BLAS on
one thread, median over the calls.

    python3 -m bptt.app.bench.checks [--backend numpy|torch] [--configs small,one-hot,...] [--repeats 7]

What it measures is time inside the checks over the call's time; the timing wrappers add about a
microsecond a check, which counts against the checks.
"""

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import time

from bptt.app.bench.measuring import single_threaded
from bptt.app.bench.readme_table import CONFIGS

# the checks of a call besides those named _check_*: argument parsing, the parameters' dtype and sizes, and the
# look at the result that names a parameter holding nan or inf
CHECKS = ("_truncation", "_params_dtype", "_param_sizes", "_bound_sizes", "_bind_sizes", "_blamed")


SPENT, DEPTH = [0.0], [0]  # seconds inside checks since the last reset; how deep in checks the call is


def instrument(modules):
    """Wrap every check function of the modules (once) with a timer adding into SPENT."""

    def timed(function):
        def wrapper(*args, **kwargs):
            DEPTH[0] += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                DEPTH[0] -= 1
                if DEPTH[0] == 0:
                    SPENT[0] += time.perf_counter() - start

        wrapper.timed = True
        return wrapper

    for module in modules:
        for name, value in list(vars(module).items()):
            checking = name.startswith("_check") or name in CHECKS
            if checking and callable(value) and not isinstance(value, type) and not hasattr(value, "timed"):
                setattr(module, name, timed(value))


def problem(module, backend, steps, batch, sizes, dtype):
    """Parameters, inputs and targets drawn by the module itself, from its backend's generator."""
    from bptt.codegen.backends import of

    adapter = of(backend)
    rng, dtype = adapter.generator(0), adapter.dtype(dtype)
    return module.init_params(rng, dtype=dtype, **sizes), *module.random_inputs(rng, steps, batch, dtype=dtype, **sizes)


def share(backend, config, dtype, repeats):
    """The median share of a call spent in checks."""
    model, steps, batch, sizes = CONFIGS[config]
    from bptt.codegen.backends import of

    module = importlib.import_module(f"bptt.generated.{of(backend).filename(model)[:-3]}")
    runtime = importlib.import_module(of(backend).runtime)
    passes = importlib.import_module(of(backend).runtime + "_passes")  # the public calls, which make the checks
    shared = [importlib.import_module(f"bptt.runtime.{name}") for name in ("common", "checks")]
    params, xs, ys = problem(module, backend, steps, batch, sizes, dtype)
    instrument([module, runtime, passes, *shared])
    for _ in range(2):
        module.loss_and_grads(params, xs, ys)
    shares = []
    for _ in range(repeats):
        SPENT[0] = 0.0
        start = time.perf_counter()
        module.loss_and_grads(params, xs, ys)
        shares.append(SPENT[0] / (time.perf_counter() - start))
    return statistics.median(shares)


def main():
    from bptt.codegen.backends import BACKENDS, of, reference

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    eager = [name for name, backend in BACKENDS.items() if not backend.traced]  # a jit's checks run when traced
    parser.add_argument("--backend", choices=eager, default=reference().name)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    unknown = sorted(set(args.configs.split(",")) - set(CONFIGS))
    if unknown or args.repeats < 1:
        parser.error(f"--configs takes {', '.join(CONFIGS)}; --repeats a positive count")
    if single_threaded(os.environ) != dict(os.environ):
        env = single_threaded(os.environ)  # before NumPy loads BLAS
        sys.exit(subprocess.run([sys.executable, "-m", __spec__.name, *sys.argv[1:]], env=env, check=False).returncode)
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    of(args.backend).single_thread()
    print(f"{args.backend}: the checks' share of a loss_and_grads call, median of {args.repeats}")
    for config in args.configs.split(","):
        for dtype in ("float64", "float32"):
            print(f"{config:>11} {dtype}: {share(args.backend, config, dtype, args.repeats) * 100:5.1f} %")


if __name__ == "__main__":
    main()
