"""BPTT in bounded memory on a long sequence: the extra peak memory of one loss_and_grads call with
checkpoints, measured, for the Elman RNN and the LSTM in NumPy, torch and JAX.

    python3 -m bptt.app.bench.bounded_memory [T] [slots]      (default T = 100000, 100 slots)

Each measurement runs in a fresh process on one thread: the inputs are made, the resident-memory
high-water mark is reset (/proc/self/clear_refs), a call runs, and what it added to the resident memory
at its peak is reported, for the first call (the schedule computed, JAX compiling a program per segment
length) and the second, next to what full BPTT would store (T steps of the arrays the derivation sizes,
the runtime's checkpoint_bytes), with the calls' times and the step evaluations. B = 8, d = q = 16, h = 64, float64.
"""

import json
import os
import subprocess
import sys

from bptt.app.bench.measuring import single_threaded, status, step_bytes

SIZES = {"d": 16, "h": 64, "q": 16}


def measure(backend, name, steps, slots):
    """{MiB added at the peak, seconds, ...} of one call in this process."""
    import time

    import numpy as np

    from bptt.app.bench.backends import arrays
    from bptt.codegen.backends import checkpoint_cost, of
    from bptt.runtime import schedule

    adapter = of(backend)
    numpy_module = __import__(f"bptt.generated.{name}", fromlist=["_"])
    module = __import__(f"bptt.generated.{adapter.filename(name)[:-3]}", fromlist=["_"])
    rng = np.random.default_rng(0)
    params = numpy_module.init_params(rng, **SIZES)
    xs, ys = numpy_module.random_inputs(rng, steps, 8, **SIZES)
    params, xs, ys, _ = arrays(backend, (params, xs, ys, {}))
    calls = []
    for _ in range(2):
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # the high-water mark starts again at the resident size
        before = status("VmRSS")
        start = time.perf_counter()
        loss, grads = module.loss_and_grads(params, xs, ys, checkpoints=slots)
        float(loss)  # computed to the end
        calls.append(((status("VmHWM") - before) / 2**20, time.perf_counter() - start))
        del loss, grads
    allocated = float("nan")
    if adapter.numpy_arrays:  # what its arrays and the schedule's tables take at the peak, as tracemalloc sees them
        import tracemalloc

        schedule._SCHEDULES.clear()  # the runtime keeps the last schedules: computed again, counted
        tracemalloc.start()
        module.loss_and_grads(params, xs, ys, checkpoints=slots)
        allocated = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    state, forward_step, backward_step = step_bytes(numpy_module, SIZES, 8, 8)
    evaluations, _ = checkpoint_cost(slots, state, forward_step + backward_step, steps)
    full = steps * (forward_step + backward_step) / 2**20
    return {"calls": calls, "allocated": allocated, "full": full, "passes": evaluations / steps}


def main(argv):
    steps = int(argv[0]) if argv else 100_000
    slots = int(argv[1]) if len(argv) > 1 else 100
    if len(argv) > 2:  # a child: one measurement
        print(json.dumps(measure(argv[2], argv[3], steps, slots)))
        return 0
    print(f"T={steps}, {slots} slots, B=8, d=q=16, h=64, float64, one thread; MiB (allocated: NumPy's arrays)")
    head = ("model", "backend", "first: RSS+", "s", "second: RSS+", "s", "allocated", "full BPTT", "passes")
    print(" ".join(f"{cell:>13}" for cell in head))
    from bptt.codegen.backends import BACKENDS

    for name in ("elman", "lstm"):
        for backend in BACKENDS:
            command = [sys.executable, "-m", __spec__.name, str(steps), str(slots), backend, name]
            done = subprocess.run(command, env=single_threaded(os.environ), capture_output=True, text=True, check=True)
            row = json.loads(done.stdout.splitlines()[-1])
            (first, first_s), (second, second_s) = row["calls"]
            cells = (name, backend, f"{first:.1f}", f"{first_s:.1f}", f"{second:.1f}", f"{second_s:.1f}")
            cells += (f"{row['allocated']:.1f}", f"{row['full']:.1f}", f"{row['passes']:.2f}")
            print(" ".join(f"{cell:>13}" for cell in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
