"""The benchmark tables of the README: the generated NumPy module against hand-optimised NumPy, PyTorch
and JAX, then the torch and JAX modules against their framework's own, on one pinned core with BLAS on
one thread; headed by the date and the machine (its processor and one-thread GEMM rate) to scale by.

    python3 -m bptt.app.bench.readme_table [--repeats 7] [--configs small,medium,...] [--tables speed,backends,lengths]

Each configuration runs `bptt bench`'s measurement (app/bench/bench.py): every implementation's
gradients are checked against the generated module's first, then all are timed round-robin in
the same run. A cell is generated time / peer time (below 1: the generated module is faster);
"GEMMs only" is the time of the same matrix products with nothing else. The lengths table is
`bptt bench MODEL --lengths T|random`'s: loss_and_grads with lengths= / the same call without.
"""

import argparse
import datetime
import os
import subprocess
import sys

CONFIGS = {  # name: (model, T, B, sizes)
    "small": ("elman", 35, 32, {"d": 28, "h": 32, "q": 28}),
    "medium": ("elman", 35, 32, {"d": 28, "h": 256, "q": 28}),
    "large": ("elman", 100, 64, {"d": 256, "h": 512, "q": 256}),
    "one-hot": ("elman-onehot", 20, 1, {"d": 8000, "h": 100, "q": 8000}),
    "gru": ("gru", 50, 16, {"d": 32, "h": 64, "q": 32}),
    "lstm": ("lstm", 50, 16, {"d": 32, "h": 64, "q": 32}),
    "gru-large": ("gru", 100, 64, {"d": 256, "h": 512, "q": 256}),
    "lstm-large": ("lstm", 100, 64, {"d": 256, "h": 512, "q": 256}),
}
PEERS = ("hand", "torch", "jax")  # the table's columns
# The framework backends against the framework's own modules: (model, T, B, sizes) of the gated configs' two sizes
BACKEND_CONFIGS = [
    (model, steps, batch, sizes)
    for steps, batch, sizes in ((50, 16, {"d": 32, "h": 64, "q": 32}), (100, 64, {"d": 256, "h": 512, "q": 256}))
    for model in ("elman", "gru", "lstm")
]
LENGTHS_CONFIGS = [CONFIGS["small"], CONFIGS["lstm"]]  # lengths= / no lengths, in the NumPy and torch modules
TABLES = ("speed", "backends", "lengths")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--tables", default=",".join(TABLES), help="some of speed,backends,lengths (default all)")
    args = parser.parse_args()
    tables = args.tables.split(",")
    if not set(tables) <= set(TABLES):
        parser.error(f"--tables: expected some of {','.join(TABLES)}; got {args.tables!r}")
    from bptt.app.bench import bench
    from bptt.app.bench.measuring import single_threaded

    if single_threaded(os.environ) != dict(os.environ):
        env = single_threaded(os.environ)  # the thread settings must come before NumPy loads BLAS
        command = [sys.executable, "-m", __spec__.name, *sys.argv[1:]]
        sys.exit(subprocess.run(command, env=env, check=False).returncode)
    core = bench.pin()
    from bptt.app.bench.machine import line

    print(f"{datetime.date.today()}: {line()}")
    print(f"one core ({core}), BLAS on one thread, median of {args.repeats} after 2 warm-up rounds, round-robin")
    if "speed" in tables:
        speed_table(args.configs.split(","), args.repeats)
    if "backends" in tables:
        backends_table(args.repeats)
    if "lengths" in tables:
        lengths_table(args.repeats)


def speed_table(configs, repeats):
    """The generated NumPy module / hand NumPy, torch.nn, jax.grad of a scan and the GEMMs alone, same run each."""
    import numpy as np

    from bptt.app.bench import bench
    from bptt.app.verify.check import load_module
    from bptt.derive.models import load

    print("| config (T, B, sizes) | dtype | generated ms | vs hand NumPy | vs torch | vs JAX | vs GEMMs only |")
    print("|---|---|---|---|---|---|---|")
    for name in configs:
        model_name, steps, batch, sizes = CONFIGS[name]
        model = load(model_name)
        module = load_module(model, from_zoo=True)
        for dtype in ("float64", "float32"):
            rows, _ = bench.run(model, module, sizes, steps, batch, np.dtype(dtype), repeats, PEERS)
            by_name = {row.name: row for row in rows}
            cells = [_ratio(by_name.get(peer)) for peer in (*PEERS, "GEMMs only")]
            generated = by_name["generated"].median_ms
            print(
                f"| {name} ({model_name}: T={steps}, B={batch}, {_shown(sizes)}) | {dtype} | {generated:.2f} | "
                + " | ".join(cells)
                + " |"
            )


def backends_table(repeats):
    """The torch module / torch.nn and the JAX module (under jax.jit) / jax.grad of a scan, same run each."""
    import numpy as np

    from bptt.app.bench import bench
    from bptt.app.verify.check import load_module
    from bptt.codegen.backends import BACKENDS
    from bptt.derive.models import load

    print("\n| model (T, B, sizes) | dtype | torch module / torch.nn | JAX module / jax.grad of scan |")
    print("|---|---|---|---|")
    for model_name, steps, batch, sizes in BACKEND_CONFIGS:
        model = load(model_name)
        numpy_module = load_module(model, from_zoo=True)
        for dtype in ("float64", "float32"):
            cells = []
            for backend in (name for name, b in BACKENDS.items() if b.peer):
                module = load_module(model, from_zoo=True, backend=backend)
                rows, _ = bench.run(model, module, sizes, steps, batch, np.dtype(dtype), repeats, (backend,), 0,
                                    backend, numpy_module)  # fmt: skip
                cells.append(_ratio({row.name: row for row in rows}.get(backend)))
            print(f"| {model_name} (T={steps}, B={batch}, {_shown(sizes)}) | {dtype} | " + " | ".join(cells) + " |")


def lengths_table(repeats):
    """loss_and_grads with lengths= / without, in the NumPy and torch modules: every length T, and random ones."""
    import numpy as np

    from bptt.app.bench import lengths as padded
    from bptt.app.verify.check import load_module
    from bptt.derive.models import load
    from bptt.runtime.options import Lengths

    print("\n| model (T, B, sizes) | backend | dtype | no lengths ms | lengths=T / no lengths | random / no lengths |")
    print("|---|---|---|---|---|---|")
    for model_name, steps, batch, sizes in LENGTHS_CONFIGS:
        model = load(model_name)
        numpy_module = load_module(model, from_zoo=True)
        for backend in ("numpy", "torch"):
            module = load_module(model, from_zoo=True, backend=backend)
            for dtype in ("float64", "float32"):
                cells = []
                for lengths in (Lengths(full=True), Lengths()):
                    rows, _ = padded.run(module, sizes, steps, batch, np.dtype(dtype), lengths, repeats, 0, backend,
                                         numpy_module)  # fmt: skip
                    cells.append(_ratio(rows[1] if rows[0].ratio == rows[0].ratio else rows[0]))  # padded: checked
                unpadded = f"{rows[1].median_ms:.2f}"
                print(f"| {model_name} (T={steps}, B={batch}, {_shown(sizes)}) | {backend} | {dtype} | {unpadded} | "
                      + " | ".join(cells) + " |")  # fmt: skip


def _shown(sizes):
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _ratio(row):
    if row is None or row.ratio != row.ratio:
        return "-" if row is None else row.note
    return f"{row.ratio:.2f}"


if __name__ == "__main__":
    main()
