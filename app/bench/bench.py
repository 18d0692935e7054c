"""`bptt bench`: the generated module against its peers, on one pinned core with BLAS on one thread.

The CLI runs main in a child process (app/bench/child.py), so that the thread settings (THREADS)
come before NumPy, PyTorch and JAX load their libraries; the child pins itself to one core. It builds one
problem, and checks every implementation's loss and gradients against the generated module's: a
peer that disagrees is reported and not timed. Then every repeat calls each implementation once,
in turn (round-robin, so that a slow moment of the machine hits all of them alike, each round
starting one implementation later); after two
warm-up rounds the median over repeats is reported, with the ratio generated / peer of the same
run. Memory comes last, one implementation at a time: what one call allocates at its peak (NumPy's
arrays, as tracemalloc sees them; not PyTorch's or JAX's), what it adds to the resident memory at
its peak (the high-water mark reset through /proc/self/clear_refs), and the minor page faults per
call. The generated module's work arrays, kept between calls, are counted apart ("workspace").
"""

import importlib
import json
import os
import sys

from bptt.app.bench import checkpoints, process
from bptt.app.bench.measuring import WARMUP, Row, measured, random_problem, single_threaded, table
from bptt.codegen.backends import BACKENDS, of, reference

NUMPY = ("naive", "hand", "GEMMs only")  # the NumPy peers (peers.py), whose allocations tracemalloc sees
PEERS = (*reference().peers, *(backend.name for backend in BACKENDS.values() if backend.peer))


def default_peers(backend):
    """The peers `bptt bench --backend` measures unless --peers names them: the reference's own and every
    framework's peer for the reference (NumPy); else the reference's module and the backend's framework's peer."""
    adapter = BACKENDS[backend]
    if adapter.reference:
        return PEERS
    return (reference().name, *((adapter.name,) if adapter.peer else ()))


def numpy_names(backend):
    """The implementations whose allocations tracemalloc sees, when the generated module is the backend's."""
    return (("generated",) if BACKENDS[backend].numpy_arrays else ()) + NUMPY + (reference().name,)


def implementations(model, module, problem, peers, backend=None, numpy_module=None):
    """{name: (run, collect)}: the generated module first, then every peer that has this model. With a
    framework's backend, `module` is its generated module and `numpy_module` the NumPy one (peer "numpy")."""
    from bptt.app.bench import peers as numpy_peers
    from bptt.app.bench.backends import generated_call

    params, xs, ys, initial = problem
    adapter = of(backend)
    if adapter.reference:
        out = {"generated": (lambda: module.loss_and_grads(params, xs, ys, **initial), lambda r: r)}
    else:
        out = {"generated": generated_call(adapter.name, module, problem)}
        if reference().name in peers:
            out[reference().name] = (lambda: numpy_module.loss_and_grads(params, xs, ys, **initial), lambda r: r)
    notes = {}
    for name, peer in numpy_peers.numpy_peers(model).items():
        if name in peers or (name == "GEMMs only" and "hand" in peers):
            out[name] = (lambda peer=peer: peer(params, xs, ys, initial), lambda r: r)
    for name, library in ((b.name, importlib.import_module(b.peer)) for b in BACKENDS.values() if b.peer):
        if name not in peers:
            continue
        if not library.available():
            notes[name] = "not installed"
        elif not library.supports(model):
            notes[name] = "has no such model"
        else:
            out[name] = library.prepare(model, params, xs, ys, initial)
    notes.update({name: "has no such model" for name in peers if name not in out and name not in notes})
    return out, notes


def workspace_mib(module):
    """The work arrays the generated module keeps for this thread, in MiB (views not counted)."""
    held = getattr(module, "_THREAD", None)
    arrays = [a for _, work in (held.__dict__.values() if held else ()) for a in work.values() if a.base is None]
    return sum(a.nbytes for a in arrays) / 2**20


def run(model, module, sizes, steps, batch, dtype, repeats=7, peers=PEERS, seed=0, backend=None, numpy_module=None):
    """Rows for the generated module and every peer, and the workspace size in MiB (NumPy's module).
    With a framework's backend, numpy_module (the NumPy module) makes the problem."""
    problem, _ = random_problem(numpy_module or module, sizes, steps, batch, dtype, seed)
    found, notes = implementations(model, module, problem, peers, backend, numpy_module)
    expected = found["generated"][1](found["generated"][0]())
    rows = measured(found, expected, dtype, repeats, "the same matrix products, nothing else")
    rows.update({name: Row(name, note=note) for name, note in notes.items()})
    return list(rows.values()), workspace_mib(module)


def child_command(spec):
    """The command line of the child process that measures spec (a JSON-able dict)."""
    return [sys.executable, "-m", "bptt.app.bench.child", json.dumps(spec, sort_keys=True)]


def pin(cpu=None):
    """Pin this process to one core (the last one it may run on, unless cpu is given); that core."""
    allowed = sorted(os.sched_getaffinity(0))
    core = allowed[-1] if cpu is None else cpu
    os.sched_setaffinity(0, {core})
    return core


def main(argv=None):
    """The child: measure the model spec in argv[0] (JSON) and print the tables; 1 if a peer disagreed."""
    spec = json.loads((argv or sys.argv[1:])[0])
    core = pin(spec.get("cpu"))
    import numpy as np

    from bptt.app.bench.calls import module_calls
    from bptt.app.verify.check import load_module
    from bptt.derive.models import ZOO, load

    model = load(spec["model"])
    backend = spec.get("backend", reference().name)
    adapter = of(backend)
    numpy_module = load_module(model, from_zoo=spec["model"] in ZOO)
    module = load_module(model, from_zoo=spec["model"] in ZOO, backend=backend)
    if spec.get("checkpoints"):
        return checkpoints.child(dict(spec, backend=backend, numpy_module=numpy_module), module, core)
    from bptt.app.bench.machine import line

    print(f"machine: {line()} (to scale these times by)")
    generated_for = "" if adapter.reference else f", generated for {backend}"
    print(f"{model.name}{generated_for}: {module_calls(model, module, backend).line(backend)}")
    if spec.get("lengths"):
        return padded_tables(spec, module, numpy_module, core)
    failed = False
    for dtype in spec["dtypes"]:
        rows, held = run(
            model,
            module,
            spec["sizes"],
            spec["steps"],
            spec["batch"],
            np.dtype(dtype),
            spec["repeats"],
            spec["peers"],
            backend=backend,
            numpy_module=numpy_module,
        )
        shown = ", ".join(f"{k}={v}" for k, v in spec["sizes"].items())
        print(
            f"{model.name} {dtype}{generated_for}: T={spec['steps']} B={spec['batch']} {shown}; core {core}, "
            f"one thread, median of {spec['repeats']} (round-robin, after {WARMUP} warm-up rounds)"
        )
        print(table(rows, numpy_names(backend)))
        if adapter.numpy_arrays:
            print(f"generated workspace: {held:.2f} MiB kept between calls\n")
        failed = failed or any(row.note.startswith("gradients differ") for row in rows)
    return 1 if failed else 0


def padded_tables(spec, module, numpy_module, core):
    """--lengths: a table per dtype of loss_and_grads with lengths= against without (app/bench/lengths.py), and
    their ratio; 1 if the padded call's gradients were wrong."""
    import numpy as np

    from bptt.app.bench import lengths as padded
    from bptt.runtime.options import Lengths

    lengths, failed = Lengths.parse(spec["lengths"]), False
    for dtype in spec["dtypes"]:
        rows, drawn = padded.run(module, spec["sizes"], spec["steps"], spec["batch"], np.dtype(dtype), lengths,
                                 spec["repeats"], backend=spec["backend"], numpy_module=numpy_module)  # fmt: skip
        shown = ", ".join(f"{k}={v}" for k, v in spec["sizes"].items())
        print(
            f"{spec['model']} {dtype}, lengths={lengths.text()}: T={spec['steps']} B={spec['batch']} {shown}; "
            f"core {core}, one thread, median of {spec['repeats']} (round-robin, after {WARMUP} warm-up rounds); "
            f"generated: loss_and_grads with lengths=, {padded.UNPADDED}: the same call without"
        )
        print(table(rows, (padded.PADDED, padded.UNPADDED) if of(spec["backend"]).numpy_arrays else ()))
        print(padded.summary(rows, drawn) + "\n")
        failed = failed or rows[0].note.startswith("gradients differ")
    return 1 if failed else 0


def launch(spec):
    """Run the child (app/bench/child.py) with one thread for every library (app/bench/process.py); its exit status."""
    outputs = checkpoints.paths(spec["output"]) if spec.get("output") else ()
    return process.run(child_command(spec), single_threaded(os.environ), outputs)
