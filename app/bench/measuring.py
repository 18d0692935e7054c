"""How `bptt bench` and the README's benchmark scripts measure: one thread for every library, the largest
relative difference of two gradients, round-robin timing after a warm-up, and what one call takes in memory;
the rows of a run (checked, timed, measured) and their table."""

import resource
import statistics
import time
import tracemalloc
from dataclasses import dataclass

XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false"
THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "XLA_FLAGS": XLA_ONE_THREAD}
TOLERANCE = {"float64": 1e-9, "float32": 2e-3}  # largest relative difference of a gradient array
WARMUP = 2


def single_threaded(environ):
    """environ with THREADS: one thread for BLAS and OpenMP, and XLA's one-thread flag in the user's XLA_FLAGS,
    whose other flags are kept (a value not starting with "--" names a file of flags: replaced)."""
    flags = environ.get("XLA_FLAGS", "").split()
    if flags[:1] and not flags[0].startswith("--"):
        flags = []
    name = XLA_ONE_THREAD.partition("=")[0]
    flags = [XLA_ONE_THREAD if flag.partition("=")[0] == name else flag for flag in flags]
    flags += [] if XLA_ONE_THREAD in flags else [XLA_ONE_THREAD]
    return {**environ, **THREADS, "XLA_FLAGS": " ".join(flags)}


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


@dataclass
class Row:
    name: str
    median_ms: float = float("nan")
    ratio: float = float("nan")  # generated time / this time, from the same run
    allocated_mib: float = float("nan")  # what one call allocates at its peak (NumPy arrays; tracemalloc)
    peak_mib: float = float("nan")  # what one call adds to the resident memory at its peak
    faults: float = float("nan")  # minor page faults per call
    error: float = 0.0  # largest relative difference of a gradient from the generated module's
    note: str = ""


def random_problem(module, sizes, steps, batch, dtype, seed=0):
    """(params, xs, ys, initial states: none) drawn by the module from the seed; the generator, for later draws."""
    import numpy as np

    rng = np.random.default_rng(seed)
    params = module.init_params(rng, dtype, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, dtype, **sizes)
    return (params, xs, ys, {}), rng


def measured(found, expected, dtype, repeats, untested):
    """{name: Row} of the implementations found ({name: (run, collect)}): each one's gradients checked against
    expected, those that agree timed round-robin (ratio: the time of "generated" / its time), then their memory.
    An implementation whose collect gives None is a timing reference, not checked (untested: what it is)."""
    import numpy as np

    rows, calls = {}, {}
    for name, (call, collect) in found.items():
        result = collect(call())
        if result is None:
            rows[name], calls[name] = Row(name, note=untested), call
            continue
        error = disagreement(expected, result)
        rows[name] = Row(name, error=error)
        if error <= TOLERANCE[np.dtype(dtype).name]:
            calls[name] = call
        else:
            rows[name].note = f"gradients differ by {error:.1e}: not timed"
    medians = rounds(calls, repeats)
    for name, seconds in medians.items():
        rows[name].median_ms = seconds * 1e3
        rows[name].ratio = medians.get("generated", float("nan")) / seconds
    for name, call in calls.items():
        rows[name].allocated_mib, rows[name].peak_mib, rows[name].faults = memory(call)
    return rows


def table(rows, numpy_names):
    """The rows as an aligned text table; allocations shown for the NumPy implementations (numpy_names) only."""
    head = (
        "implementation",
        "median ms",
        "generated/peer",
        "alloc MiB",
        "RSS+ MiB",
        "faults/call",
        "max rel. diff",
        "",
    )
    cells = [head]
    for row in rows:
        if row.median_ms != row.median_ms:  # nan: not timed
            cells.append((row.name, "-", "-", "-", "-", "-", f"{row.error:.1e}" if row.error else "-", row.note))
            continue
        cells.append(
            (
                row.name,
                f"{row.median_ms:.3f}",
                f"{row.ratio:.2f}",
                f"{row.allocated_mib:.2f}" if row.name in numpy_names else "-",
                f"{row.peak_mib:.2f}",
                f"{row.faults:.0f}",
                f"{row.error:.1e}",
                row.note,
            )
        )
    widths = [max(len(str(c[k])) for c in cells) for k in range(len(head))]
    lines = [
        "  ".join(str(c[k]).ljust(widths[k]) if k == 0 else str(c[k]).rjust(widths[k]) for k in range(len(head)))
        for c in cells
    ]
    return "\n".join(line.rstrip() for line in lines)
