"""How `bptt bench` and the README's benchmark scripts measure: one thread for every library, the largest
relative difference of two gradients, round-robin timing after a warm-up, and what one call takes in memory."""

import resource
import statistics
import time
import tracemalloc

THREADS = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}
TOLERANCE = {"float64": 1e-9, "float32": 2e-3}  # largest relative difference of a gradient array
WARMUP = 2


def disagreement(expected, got):
    """The largest relative difference between two (loss, gradients) results."""
    (loss, grads), (other_loss, other) = expected, got
    if set(grads) != set(other):
        return float("inf")
    worst = abs(loss - other_loss) / max(abs(loss), 1e-300)
    for key, value in grads.items():
        scale = max(float(abs(value).max()), 1e-300)
        worst = max(worst, float(abs(value - other[key]).max()) / scale)
    return worst


def rounds(calls, repeats):
    """{name: median seconds} over `repeats` round-robin rounds after the warm-up. Each round starts one
    implementation later than the one before, so that none always follows the same other one (a library
    whose threads keep spinning after a call slows whatever runs next)."""
    times = {name: [] for name in calls}
    names = list(calls)
    for round_ in range(WARMUP + repeats):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            start = time.perf_counter()
            calls[name]()
            if round_ >= WARMUP:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def memory(call, calls=3):
    """(peak MiB of the arrays one call allocates, as tracemalloc sees NumPy's; the MiB it adds to the
    resident memory at its peak; minor page faults per call)."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        call()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / calls
    tracemalloc.start()
    call()
    allocated = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets the peak (VmHWM) to the current resident size
    except OSError:
        return allocated, float("nan"), faults
    before = status("VmRSS")
    call()
    return allocated, (status("VmHWM") - before) / 2**20, faults


def status(field):
    """A field of /proc/self/status (VmRSS, VmHWM, ...) in bytes."""
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith(field + ":")) * 1024


def step_bytes(module, sizes, batch, itemsize, ages=1):
    """(bytes of a kept state, of a stored step's forward arrays, of its backward arrays) of a generated module,
    as its runtime weighs them (the _Passes it hands the runtime)."""
    return module._PASSES.checkpoint_bytes(sizes, batch, itemsize, ages)
