"""The backends a model's module can be generated for: one registry entry each, read by the CLI, the renderer and
the tests, and app's one door into codegen.

A backend is one folder under codegen/ whose `adapter.py` holds ADAPTER (codegen/adapter.py): its names, the
render module that prints its module from the statement IR, and what the app needs of its framework (arrays to
and from NumPy, jit, random numbers, bench's peers). REGISTRY names the folders of this package; a backend of
another package registers itself as an entry point of the group ENTRY_POINTS naming its adapter module, e.g.
`toy = toy_backend.adapter`. Codegen never imports a framework itself: only the generated module does (and an
adapter when the app calls it), so `bptt codegen --backend torch` works without torch installed.
"""

import importlib
import importlib.metadata
from dataclasses import dataclass

from bptt.codegen import names
from bptt.codegen.adapter import Adapter, MissingFramework  # noqa: F401 (the app catches it from here)
from bptt.codegen.namer import Namer
from bptt.codegen.printing import collector
from bptt.codegen.printing.code_check import kept_code
from bptt.codegen.printing.columns import WIDTH, applied, laid_out
from bptt.derive.refusal import refusing

REGISTRY = {  # a backend's name: the module holding its ADAPTER
    "numpy": "bptt.codegen.numpy.adapter",
    "torch": "bptt.codegen.torch.adapter",
    "jax": "bptt.codegen.jax.adapter",
}
ENTRY_POINTS = "bptt.backends"  # another package's backends: name = the module holding its ADAPTER


@dataclass(frozen=True)
class Backend:
    """A registered backend: its adapter's attributes and methods (name, title, suffix, to_framework, ...),
    and the module it prints for a model."""

    adapter: Adapter

    def __getattr__(self, name):
        return getattr(self.adapter, name)

    def module_source(self, model, program=None, standalone=False):
        """The module's source, laid out in 120 columns (printing/columns.py): `rendered`'s, the same code (else
        an internal error, never a module that computes something else: printing/code_check.py)."""
        with collector.paused():  # printing/collector.py
            source = self.rendered(model, program, standalone)
            changes = laid_out(source)
            if not kept_code(source, changes):
                raise AssertionError(f"laying the {self.title} module out in {WIDTH} columns changed its code")
            return applied(source, changes)

    def rendered(self, model, program=None, standalone=False):
        """The module's source before its layout, its names given by one Namer (codegen/namer.py); program:
        statements to print as they are (a test's, built from the model; its names must meet none of the
        code's), else built here. ModelError if a name of the model is one the generated code cannot give way
        to (names.check); a Refusal (naming the model, this backend and the equation) if the model has a node
        with no rule or no code. standalone: the module carries the runtime it calls instead of importing
        bptt.runtime."""
        names.check(model)
        render = importlib.import_module(self.renderer).module_source
        with refusing(model, self.title):
            if program is not None:
                return render(model, program, standalone)
            namer = Namer(model)
            with namer.rendering(self.title) as hidden:
                source = render(hidden, None, standalone)
        return namer.spell(source)

    def filename(self, model_name):
        return model_name.replace("-", "_") + self.suffix + ".py"


def _registered():
    """{name: Backend}: this package's folders (REGISTRY), then those other packages register (ENTRY_POINTS)."""
    modules = dict(REGISTRY)
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        modules.setdefault(entry.name, entry.value)
    found = {}
    for name, module in modules.items():
        adapter = importlib.import_module(module).ADAPTER
        if adapter.name != name:
            raise ImportError(f"the backend registered as {name} ({module}) calls itself {adapter.name}")
        found[name] = Backend(adapter)
    return found


BACKENDS = _registered()


def reference():
    """The backend every other one is checked and benchmarked against (NumPy)."""
    return next(backend for backend in BACKENDS.values() if backend.reference)


def of(name=None):
    """The backend of that name; None: the reference."""
    return reference() if name is None else BACKENDS[name]


def module_filename(model, backend=None):
    """generated/<model>.py, or <model>_<backend>.py for a framework's backend."""
    return of(backend).filename(model.name)


def require(backend):
    """Import a backend's framework, or raise MissingFramework naming the extra."""
    return BACKENDS[backend].load()


def require_installed(backend):
    """Raise MissingFramework naming the extra unless a backend's framework is installed (not importing it)."""
    BACKENDS[backend].installed()


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

    scope = namespace(names, reference().name, scope)
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
