"""Time forward + backward of every generated module, the generated Elman code
against a naive per-step, per-sample BPTT loop written here, and forward mode
(RTRL) against BPTT as the model grows.

    python3 -m bptt.app.bench.zoo_times [--repeats N]

Not a test (pytest collects tests/ only): it prints a table of median and best times. For the
generated code against hand-written NumPy, PyTorch and JAX, see `bptt bench` and app/bench/readme_table.py.
BLAS runs on one thread unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS say otherwise: the
per-step products are small (B rows), and on a shared machine extra threads mostly add noise.
"""

import argparse
import importlib
import inspect
import os

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

import time  # noqa: E402

import numpy as np  # noqa: E402

from bptt.derive.models import names  # noqa: E402

T, B = 100, 32
SIZES = {"d": 64, "h": 128, "q": 64}  # sizes of other names default to 64


def module_of(name):
    """generated/<name>.py, or None if the zoo model has not been generated."""
    try:
        return importlib.import_module("bptt.generated." + name.replace("-", "_"))
    except ModuleNotFoundError:
        return None


def forward(module, params, xs, ys):
    """module.forward; a model trained with teacher forcing also reads the targets ys."""
    if "ys" in inspect.signature(module.forward).parameters:
        return module.forward(params, xs, ys)
    return module.forward(params, xs)


def timed(function, repeats):
    """(median, best) wall time of function() in milliseconds, after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(1e3 * (time.perf_counter() - start))
    return float(np.median(times)), min(times)


def time_module(module, params, xs, ys, rng, repeats):
    """Timings of forward, backward (for random d_outputs) and loss_and_grads."""
    outputs, cache = forward(module, params, xs, ys)
    d_outputs = rng.standard_normal(outputs.shape).astype(outputs.dtype)
    return (
        timed(lambda: forward(module, params, xs, ys), repeats),
        timed(lambda: module.backward(params, cache, d_outputs), repeats),
        timed(lambda: module.loss_and_grads(params, xs, ys), repeats),
    )


def naive_elman(params, xs, ys):
    """Elman BPTT one sample and one step at a time, matrix-vector products and outer products.

    Returns the loss averaged over the batch and the gradients, like loss_and_grads."""
    U, W, V, b, c = (params[k] for k in ("U", "W", "V", "b", "c"))
    steps, batch, _ = xs.shape
    grads = {k: np.zeros_like(v) for k, v in params.items()}
    grads["h0"] = np.zeros((batch, W.shape[0]))
    loss = 0.0
    for n in range(batch):
        hs, ps = [np.zeros(W.shape[0])], []
        for t in range(steps):
            hs.append(np.tanh(b + U @ xs[t, n] + W @ hs[-1]))
            s = c + V @ hs[-1]
            p = np.exp(s - s.max())
            p /= p.sum()
            ps.append(p)
            loss -= np.log(p[ys[t, n]])
        d_next = np.zeros(W.shape[0])  # W^T dL/da_{t+1}
        for t in reversed(range(steps)):
            d_s = ps[t].copy()
            d_s[ys[t, n]] -= 1
            d_s /= batch
            grads["V"] += np.outer(d_s, hs[t + 1])
            grads["c"] += d_s
            d_a = (1 - hs[t + 1] ** 2) * (V.T @ d_s + d_next)
            grads["U"] += np.outer(d_a, xs[t, n])
            grads["W"] += np.outer(d_a, hs[t])
            grads["b"] += d_a
            d_next = W.T @ d_a
        grads["h0"][n] = d_next
    return loss / batch, grads


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    threads = os.environ["OPENBLAS_NUM_THREADS"]
    print(f"T={T}, B={B}, sizes {SIZES}, BLAS threads {threads}, median (best) of {args.repeats} runs, ms\n")
    print(f"{'model':<14}{'dtype':<9}{'forward':>16}{'backward':>16}{'forward+backward':>20}")
    results = {}
    for name in names():
        module = module_of(name)
        if module is None:
            print(f"{name:<14}not generated (run `bptt codegen {name}`)")
            continue
        sizes = {size: SIZES.get(size, 64) for size in module.SIZES}
        for dtype in (np.float64, np.float32):
            rng = np.random.default_rng(0)
            params = module.init_params(rng, dtype, **sizes)
            xs, ys = module.random_inputs(rng, T, B, dtype, **sizes)
            fwd, bwd, both = time_module(module, params, xs, ys, rng, args.repeats)
            results[name, np.dtype(dtype).name] = (params, xs, ys, both)
            cells = "".join(f"{f'{m:.2f} ({b:.2f})':>{w}}" for (m, b), w in ((fwd, 16), (bwd, 16), (both, 20)))
            print(f"{name:<14}{np.dtype(dtype).name:<9}{cells}")
    if ("elman", "float64") in results:
        params, xs, ys, generated = results["elman", "float64"]
        loss, grads = module_of("elman").loss_and_grads(params, xs, ys)
        naive_loss, naive_grads = naive_elman(params, xs, ys)
        agree = max(np.abs(grads[k] - naive_grads[k]).max() / np.abs(grads[k]).max() for k in grads)
        naive = timed(lambda: naive_elman(params, xs, ys), max(3, args.repeats // 5))
        print("\nelman float64, loss and all gradients (median, best):")
        print(f"  generated (batched, time loop only)   {generated[0]:9.2f} ms ({generated[1]:.2f})")
        print(f"  naive loop over steps and samples     {naive[0]:9.2f} ms ({naive[1]:.2f})")
        print(f"  speedup (median)                      {naive[0] / generated[0]:9.1f}x")
        print(f"  naive vs generated: loss {abs(loss - naive_loss):.1e} apart, gradients {agree:.1e} of max-abs")
    forward_mode_costs(max(3, args.repeats // 5))


def forward_mode_costs(repeats, steps=20, batch=8):
    """Forward mode (RTRL) against BPTT for the Elman cell as the hidden size grows."""
    module = module_of("elman")
    print(f"\nelman float64, T={steps}, B={batch}, d = q = h: loss_and_grads vs forward_mode_grads, median ms")
    print(f"{'h':>4}{'|theta|':>9}{'BPTT':>10}{'RTRL':>12}{'ratio':>9}")
    for h in (8, 16, 32, 64):
        rng = np.random.default_rng(0)
        params = module.init_params(rng, d=h, h=h, q=h)
        xs, ys = module.random_inputs(rng, steps, batch, d=h, h=h, q=h)
        args = (params, xs, ys)
        bptt = timed(lambda args=args: module.loss_and_grads(*args), repeats)[0]
        rtrl = timed(lambda args=args: module.forward_mode_grads(*args), repeats)[0]
        size = sum(v.size for v in params.values())
        print(f"{h:>4}{size:>9}{bptt:>10.2f}{rtrl:>12.1f}{rtrl / bptt:>9.0f}")


if __name__ == "__main__":
    main()
