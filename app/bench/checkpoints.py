"""`bptt bench MODEL --checkpoints s1,s2,...`: the generated module's loss_and_grads in bounded memory
against full BPTT, in one run, on one pinned core with one thread (bench.main, in the child process: child.py).

Each budget's gradients are checked against full BPTT's first. Then the calls are timed round-robin
(measuring.rounds; full BPTT keeps its workspace between calls, as in a training loop) and their memory
measured one at a time (measuring.memory: what one call allocates at its peak as tracemalloc sees NumPy's
arrays, full BPTT's workspace made in the call; what it adds to the resident memory at its peak). Next to each
measurement, the optimum's prediction: the schedule's step evaluations E (codegen/backends.py: checkpoint_cost)
cost E - T forward steps more than full BPTT's T, so time / full = 1 + f (E - T) / T with f the forward pass's
share of full BPTT's time (measured: forward alone against loss_and_grads); memory, what the budget
allows against full BPTT's T stored steps.
"""

import pathlib
import sys
from dataclasses import dataclass

from bptt.app.analysis import plots
from bptt.app.analysis.drawing import gid
from bptt.app.analysis.table import Table
from bptt.app.bench.measuring import TOLERANCE, disagreement, memory, rounds, step_bytes
from bptt.app.files import write_atomic
from bptt.codegen.backends import checkpoint_cost
from bptt.runtime.options import Checkpoints

NAME = "checkpoints"  # the file stem of the CSV and PNG that -o writes
COLUMNS = ("budget", "evaluations", "extra passes", "stored MiB", "predicted time/full", "median ms")
COLUMNS += ("time/full", "alloc MiB", "RSS+ MiB", "max rel. diff")


@dataclass
class Budget:
    label: str  # "full", or the budget as given
    evaluations: int  # the step evaluations of its schedule (T for full BPTT)
    stored_mib: float  # what its schedule stores at most (kept states and a segment's steps)
    predicted: float = float("nan")  # time / full BPTT's, as the cost model predicts
    median_ms: float = float("nan")
    ratio: float = float("nan")  # measured time / full BPTT's
    allocated_mib: float = float("nan")
    peak_mib: float = float("nan")
    error: float = 0.0  # largest relative difference of a gradient from full BPTT's


def parse(text):
    """The budgets of --checkpoints: integers (slots) and byte budgets ("32MiB"), comma-separated."""
    return [Checkpoints.parse(item.strip()).argument for item in text.split(",")]  # a bad one: ValueError


def _bytes(module, sizes, batch, itemsize):
    """(bytes of a kept state, bytes of a stored step) of this module and problem."""
    state, forward_step, backward_step = step_bytes(module, sizes, batch, itemsize)
    return state, forward_step + backward_step


def require_a_step(module, sizes, batch, dtypes, budgets):
    """ValueError in one line if a byte budget holds no stored step of this problem in one of dtypes:
    before anything is measured."""
    import numpy as np

    for dtype in dtypes:
        for budget in budgets:
            try:
                Checkpoints.of(budget).budget(*_bytes(module, sizes, batch, np.dtype(dtype).itemsize))
            except ValueError as error:
                shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
                raise ValueError(f"{error} in {dtype} with B={batch}, {shown}") from None


def plan(module, sizes, steps, batch, itemsize, budget):
    """(evaluations, stored bytes at most) of a budget's schedule for this module and problem."""
    return checkpoint_cost(budget, *_bytes(module, sizes, batch, itemsize), steps)


def measure(module, problem, sizes, budgets, repeats, backend=None):
    """Budget rows, full BPTT first: checked, timed round-robin with the forward pass alone (its share f
    of full BPTT's time goes into the prediction), memory one at a time."""
    import numpy as np

    from bptt.app.bench.checkpoint_calls import call, forward_call, fresh

    params, xs, _, _ = problem
    steps, batch = xs.shape[0], xs.shape[1]
    itemsize = np.dtype(next(iter(params.values())).dtype).itemsize
    found = {"full": call(backend, module, problem, None)}
    found.update({str(budget): call(backend, module, problem, budget) for budget in budgets})
    expected = found["full"][1](found["full"][0]())
    rows = {}
    for (label, (run, collect)), budget in zip(found.items(), [None, *budgets], strict=True):
        evaluations, stored = plan(module, sizes, steps, batch, itemsize, budget)
        rows[label] = Budget(label, evaluations, stored / 2**20, error=disagreement(expected, collect(run())))
    timed = {label: run for label, (run, _) in found.items()}
    medians = rounds(dict(timed, forward=forward_call(backend, module, problem)), repeats)
    share = medians["forward"] / medians["full"]
    for label, row in rows.items():
        row.median_ms, row.ratio = medians[label] * 1e3, medians[label] / medians["full"]
        row.predicted = 1 + share * (row.evaluations - steps) / steps
        row.allocated_mib, row.peak_mib, _ = memory(fresh(module, timed[label]), calls=1)
    return list(rows.values()), share


def as_table(rows, title):
    """The rows as a Table (text, CSV)."""
    cells = []
    for row in rows:
        cells.append(
            (
                row.label,
                row.evaluations,
                round(row.evaluations / rows[0].evaluations - 1, 3),
                round(row.stored_mib, 3),
                round(row.predicted, 3),
                round(row.median_ms, 3),
                round(row.ratio, 3),
                round(row.allocated_mib, 3),
                round(row.peak_mib, 3),
                float(f"{row.error:.1e}"),
            )
        )
    return Table(NAME, title, COLUMNS, cells)


def figure(table):
    """Memory against time, measured (allocations) and as the optimum predicts (stored bytes, time)."""
    fig = plots._figure(plots.SIZE, plots.DPI)
    ax = fig.subplots()
    for x, y, style, label in (
        ("stored MiB", "predicted time/full", "o--", "optimum's prediction"),
        ("alloc MiB", "time/full", "s-", "measured"),
    ):
        points = sorted(zip(table.column(x), table.column(y), strict=True))
        ax.plot(*zip(*points, strict=True), style, label=label, gid=gid(table, x, y))
    for label, x, y in zip(table.column("budget"), table.column("alloc MiB"), table.column("time/full"), strict=True):
        ax.annotate(str(label), (x, y), textcoords="offset points", xytext=(4, 4), fontsize="small")
    ax.set_xscale("log")
    ax.set_xlabel("memory per call, MiB (log)")
    ax.set_ylabel("time / full BPTT's")
    ax.set_title(table.title, fontsize="small")
    ax.legend()
    return fig


def paths(folder):
    """The files -o writes into folder: checkpoints.png and checkpoints.csv."""
    return [pathlib.Path(folder) / f"{NAME}{suffix}" for suffix in (".png", ".csv")]


def write(table, folder):
    """checkpoints.png and checkpoints.csv into folder (made if only its parent exists), as `bptt analyze -o`
    writes its files; the paths."""
    image = plots.png(figure(table))
    pathlib.Path(folder).mkdir(exist_ok=True)
    plots.targets(folder, [NAME])
    for path, data in zip(paths(folder), (image, table.csv().encode()), strict=True):
        write_atomic(path, data)
    return paths(folder)


def child(spec, module, core):
    """The child's run for --checkpoints: a table per dtype (and -o's files for the last); 1 if a budget's
    gradients differ from full BPTT's by more than measuring.TOLERANCE."""
    import numpy as np

    failed = False
    for dtype in spec["dtypes"]:
        rng = np.random.default_rng(0)
        maker = spec["numpy_module"]  # the problem is NumPy's, converted for the backend's module
        params = maker.init_params(rng, np.dtype(dtype), **spec["sizes"])
        xs, ys = maker.random_inputs(rng, spec["steps"], spec["batch"], np.dtype(dtype), **spec["sizes"])
        rows, share = measure(
            module, (params, xs, ys, {}), spec["sizes"], spec["checkpoints"], spec["repeats"], spec["backend"]
        )
        shown = ", ".join(f"{k}={v}" for k, v in spec["sizes"].items())
        title = f"{spec['model']} {dtype} ({spec['backend']}): T={spec['steps']} B={spec['batch']} {shown}"
        print(
            f"{title}; core {core}, one thread, median of {spec['repeats']}; "
            f"forward pass {share:.0%} of full BPTT's time"
        )
        table = as_table(rows, title)
        print(table.text().split("\n", 1)[1] + "\n")
        failed = failed or any(row.error > TOLERANCE[dtype] for row in rows)
    for path in write(table, spec["output"]) if spec.get("output") else ():
        print(f"wrote {path}", file=sys.stderr)
    return 1 if failed else 0
