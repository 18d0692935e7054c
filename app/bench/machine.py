"""What a reader needs to scale a benchmark to their own machine: the processor and the rate of one GEMM
on the core the bench runs on (BLAS on one thread, as every implementation is timed)."""

import statistics
import time

GEMM_SIZE = 512  # square matrices: large enough for BLAS to reach its rate, small enough to take milliseconds


def processor():
    """The processor's model name, from /proc/cpuinfo (or "unknown processor")."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown processor"


def gemm_gflops(dtype, n=GEMM_SIZE, repeats=7):
    """GFLOP/s of NumPy's n x n matrix product in dtype (2 n^3 flops), median of repeats after a warm-up."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
    out = np.empty((n, n), dtype)
    np.matmul(a, b, out=out)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.matmul(a, b, out=out)
        times.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(times) / 1e9


def line():
    """One line: the processor and the GEMM rates of both dtypes."""
    rates = ", ".join(f"{gemm_gflops(dtype):.1f} ({dtype})" for dtype in ("float64", "float32"))
    return f"{processor()}; one-thread GEMM ({GEMM_SIZE}^3) GFLOP/s: {rates}"
