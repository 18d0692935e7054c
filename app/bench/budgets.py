"""A budget costs what it buys: what one call adds to the resident memory at its peak, for budgets from one
stored step to a terabyte and T from 7 to 100,000, in NumPy, torch and JAX (loss_and_grads) and torch's
Model (its constructor; one training step, forward and loss.backward()), against the bound: the memory the
budget can use as the backend's own module sizes it (at most full BPTT's T steps), the call's inputs and
outputs (a Model step's twice: dL/doutputs too), and CONSTANT.

    python3 -m bptt.app.bench.budgets [T,...]      (default 7,1000,100000)

Elman, B = 8, d = q = 16, h = 64, float64, one thread. Each case runs in a fresh process: a warm-up call of
the same kind at T = 7 (the framework's start-up), then, from a reset high-water mark (/proc/self/clear_refs,
as bounded_memory.py), the call at T ("first"), and the same call again ("again"; JAX's first call at a
T compiles a program per segment length). Budgets whose schedule takes more than LIMIT step evaluations
(one step at T = 100,000: 5e9) are not run; the table says so.
"""

import json
import os
import subprocess
import sys

from bptt.app.bench.measuring import single_threaded, status, step_bytes

SIZES, BATCH = {"d": 16, "h": 64, "q": 16}, 8
CONSTANT = 16  # MiB a call may add beyond its budget, inputs and outputs (the README states it)
LIMIT = 400_000  # step evaluations at most, to keep the runs short
MODEL_KINDS = ("Model()", "Model step")  # a backend's Model class (adapter.model_class): built, and one training step


def kinds():
    """Every backend's loss_and_grads, then the Model kinds."""
    from bptt.codegen.backends import BACKENDS

    return (*BACKENDS, *MODEL_KINDS)


def backend_of(kind):
    """The backend whose module a kind calls: its own, or the one whose modules define Model."""
    from bptt.codegen.backends import BACKENDS

    if kind in MODEL_KINDS:
        return next(backend for backend in BACKENDS.values() if backend.model_class)
    return BACKENDS[kind]


def budgets(step):
    """The budgets measured: one stored step (in bytes, the largest backend's), slots, byte budgets up to a terabyte."""
    return [f"{step}B", 10, 100, "32MiB", "1GiB", "1TiB", 10**12]


def problem(kind, steps):
    """(the module of the kind's backend, params, xs, ys) in its arrays, random."""
    import numpy as np

    from bptt.app.bench.backends import arrays
    from bptt.generated import elman

    backend = backend_of(kind)
    module = __import__(f"bptt.generated.{backend.filename('elman')[:-3]}", fromlist=["_"])
    rng = np.random.default_rng(0)
    params = elman.init_params(rng, **SIZES)
    xs, ys = elman.random_inputs(rng, steps, BATCH, **SIZES)
    params, xs, ys, _ = arrays(backend.name, (params, xs, ys, {}))
    return module, params, xs, ys


def run(kind, module, params, xs, ys, budget):
    """One call of the kind; returns the bytes of what it returns (the call's outputs)."""
    import numpy as np

    if kind == "Model()":
        return sum(p.nbytes for p in module.Model(**SIZES, checkpoints=budget).parameters())
    if kind == "Model step":
        model = module.Model(**SIZES, checkpoints=budget)
        outputs = model(xs)
        model.loss(outputs, ys).backward()
        # the outputs, dL/doutputs (what autograd hands CheckpointedBPTT's backward), parameters and gradients
        return 2 * outputs.nbytes + 2 * sum(p.nbytes for p in model.parameters())
    loss, grads = module.loss_and_grads(params, xs, ys, checkpoints=budget)
    float(loss)  # computed to the end
    return 8 + sum(np.asarray(g).nbytes for g in grads.values())


def child(kind, steps, budget):
    """{"first", "again": MiB added at the peak; "outputs", "inputs": MiB} of the kind's call in this process."""
    import numpy as np

    run(kind, *problem(kind, 7), budget)  # start-up
    module, params, xs, ys = problem(kind, steps)
    found = {"inputs": (sum(np.asarray(p).nbytes for p in params.values()) + xs.nbytes + ys.nbytes) / 2**20}
    for name in ("first", "again"):
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # the high-water mark starts again at the resident size
        before = status("VmRSS")
        found["outputs"] = run(kind, module, params, xs, ys, budget) / 2**20
        found[name] = (status("VmHWM") - before) / 2**20
    return found


def plan(steps, budget, kind=None):
    """(step evaluations, MiB the budget can use: its kept states and stored steps, at most full BPTT's) in
    the kind's backend (None: the reference), as its module sizes them."""
    from bptt.codegen.backends import checkpoint_cost, reference

    backend = reference() if kind is None else backend_of(kind)
    elman = __import__(f"bptt.generated.{backend.filename('elman')[:-3]}", fromlist=["_"])
    state, forward_step, backward_step = step_bytes(elman, SIZES, BATCH, 8)
    step = forward_step + backward_step
    evaluations, most = checkpoint_cost(budget, state, step, steps)
    return evaluations, most / 2**20


def main(argv):
    if argv and argv[0] == "child":
        budget = int(argv[3]) if argv[3].isdigit() else argv[3]
        print(json.dumps(child(argv[1], int(argv[2]), budget)))
        return 0
    from bptt.codegen.backends import BACKENDS

    modules = [__import__(f"bptt.generated.{b.filename('elman')[:-3]}", fromlist=["_"]) for b in BACKENDS.values()]
    step = max(sum(step_bytes(module, SIZES, BATCH, 8)[1:]) for module in modules)
    print(
        f"elman B={BATCH}, d=q=16, h=64, float64, one thread; "
        f"MiB added at the peak; bound = uses + in + out + {CONSTANT}"
    )
    head = ("T", "budget", "kind", "evaluations", "uses", "in", "out", "first", "again", "bound", "within")
    print(" ".join(f"{cell:>12}" for cell in head))
    for steps in [int(t) for t in argv[0].split(",")] if argv else (7, 1000, 100_000):
        for budget in budgets(step):
            evaluations, uses = plan(steps, budget)
            for kind in kinds():
                evaluations, uses = plan(steps, budget, kind)
                cells = [steps, budget, kind, evaluations, f"{uses:.1f}"]
                if evaluations > LIMIT and kind != "Model()":
                    print(" ".join(f"{cell:>12}" for cell in cells + ["(not run: too many evaluations)"]), flush=True)
                    continue
                command = [sys.executable, "-m", __spec__.name, "child", kind, str(steps), str(budget)]
                done = subprocess.run(
                    command, env=single_threaded(os.environ), capture_output=True, text=True, check=True
                )
                row = json.loads(done.stdout.splitlines()[-1])
                bound = uses + row["inputs"] + row["outputs"] + CONSTANT
                measured = row["again"] if backend_of(kind).compiles else max(row["first"], row["again"])
                cells += [f"{row[k]:.1f}" for k in ("inputs", "outputs", "first", "again")]
                cells += [f"{bound:.1f}", "yes" if measured <= bound else "NO"]
                print(" ".join(f"{cell:>12}" for cell in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
