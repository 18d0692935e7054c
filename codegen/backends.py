"""The backends a model's module can be generated for: one entry each, read by the CLI, the renderer and the tests.

A backend is a printer of the statement IR (with its table of elementwise code) and a helpers module; `renderer`
names the codegen sub-package whose render module's `module_source(model)` lays out its module. Codegen never imports
the framework itself: only the generated module does, so `bptt codegen --backend torch` works without torch installed.
"""

import importlib
from dataclasses import dataclass

from bptt.codegen import names
from bptt.codegen.namer import Namer
from bptt.codegen.printing.columns import columns
from bptt.derive.refusal import refusing


@dataclass(frozen=True)
class Backend:
    name: str
    title: str  # its name in words: NumPy, torch, JAX
    suffix: str  # generated/<model><suffix>.py
    framework: str  # what the generated module imports
    extra: str  # pip install 'bptt[extra]' brings the framework ("" for numpy, a dependency)
    renderer: str  # bptt.codegen.<renderer>.module_source(model): the backend's folder

    def module_source(self, model, program=None, standalone=False):
        """The module's source, laid out in 120 columns (printing/columns.py): `rendered`'s."""
        return columns(self.rendered(model, program, standalone))

    def rendered(self, model, program=None, standalone=False):
        """The module's source before its layout, its names given by one Namer (codegen/namer.py); program:
        statements to print as they are (a test's, built from the model; its names must meet none of the
        code's), else built here. ModelError if a name of the model is one the generated code cannot give way
        to (names.check); a Refusal (naming the model, this backend and the equation) if the model has a node
        with no rule or no code. standalone: the module carries the runtime it calls instead of importing
        bptt.runtime."""
        names.check(model)
        render = importlib.import_module(f"bptt.codegen.{self.renderer}.render").module_source
        with refusing(model, self.title):
            if program is not None:
                return render(model, program, standalone)
            namer = Namer(model)
            with namer.rendering(self.title) as hidden:
                source = render(hidden, None, standalone)
        return namer.spell(source)

    def filename(self, model_name):
        return model_name.replace("-", "_") + self.suffix + ".py"


BACKENDS = {
    "numpy": Backend("numpy", "NumPy", "", "numpy", "", "numpy"),
    "torch": Backend("torch", "torch", "_torch", "torch", "torch", "torch"),
    "jax": Backend("jax", "JAX", "_jax", "jax", "jax", "jax"),
}


def module_filename(model, backend="numpy"):
    """generated/<model>.py, or <model>_<backend>.py for a framework's backend."""
    return BACKENDS[backend].filename(model.name)


class MissingFramework(ImportError):
    """A backend's framework is not installed: a one-line error naming the extra that brings it."""


def require(backend):
    """Import a backend's framework, or raise MissingFramework naming the extra."""
    entry = BACKENDS[backend]
    try:
        return importlib.import_module(entry.framework)
    except ImportError as error:
        raise MissingFramework(
            f"the {backend} backend needs {entry.framework}, which is not installed: pip install 'bptt[{entry.extra}]'"
        ) from error


# What app/ reads of codegen beyond the registry (docs/architecture.md: app imports codegen only here).


def step_printer(stacked=False):
    """NumPy's printer of one derived expression at step t (stacked: for all steps at once): the code bench's
    naive peer and analyze's Jacobians evaluate in a helpers_scope. It records the helpers it prints in .used."""
    from bptt.codegen.printing.printer import RowPrinter

    return RowPrinter(stacked=stacked)


def helpers_scope(names=None, scope=None, ones=None):
    """scope (a new dict if None) with NumPy's imports and helpers defined in it: the named ones (all if None) and
    those they call; ones: the array of ones that stacked code sums rows with, put under its name."""
    from bptt.codegen.printing.helpers import namespace
    from bptt.codegen.printing.products import ONES

    scope = namespace(names, "numpy", scope)
    if ones is not None:
        scope[ONES] = ones
    return scope


def checkpoint_cost(checkpoints, state_bytes, step_bytes, steps):
    """(step evaluations, bytes stored at most: kept states and a segment's steps) of the schedule a generated
    module runs for a checkpoints argument over `steps` steps (runtime/schedule.py); None: full BPTT."""
    if checkpoints is None:
        return steps, steps * step_bytes
    from bptt.runtime import schedule

    capacities = schedule._capacities(*schedule._budget(checkpoints, state_bytes, step_bytes), steps)
    evaluations = schedule._evaluations(schedule._schedule(steps, capacities))
    most = max(kept * state_bytes + capacity * step_bytes for kept, capacity in enumerate(capacities))
    return evaluations, min(most, steps * step_bytes)
