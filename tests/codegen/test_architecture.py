"""docs/architecture.md's import rules, checked against every module's imports: imports go one way."""

import ast
import pathlib
import sys

import pytest

from bptt.codegen.backends import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE = ("derive", "codegen.ir", "codegen.ir_checkpoints", "codegen.ir_tangents", "codegen.array_names", "codegen.names")
PASSES = (*CORE, "codegen.passes")
PROGRAM = (*PASSES, "codegen.program")
PRINTING = (*PROGRAM, "codegen.printing")
BACKEND_FOLDERS = tuple(module.split(".")[2] for module in REGISTRY.values())  # codegen/<folder>/adapter.py
NOT_PASSES = (*(room for room in PRINTING if room != "codegen.passes"), "codegen.adapter")

# (room, the bptt modules it may import): the first room whose name prefixes a module's is its room
RULES = (
    ("derive", ("derive",)),
    ("documents", ("derive", "documents")),
    ("codegen.ir", CORE),
    ("codegen.ir_checkpoints", CORE),
    ("codegen.ir_tangents", CORE),
    ("codegen.array_names", CORE),
    ("codegen.names", CORE),
    ("codegen.passes", PASSES),
    ("codegen.program", PROGRAM),
    ("codegen.printing", PRINTING),
    # a backend folder: the printing and below, but never the passes (docs/architecture.md's table)
    *((f"codegen.{name}", (*NOT_PASSES, f"codegen.{name}")) for name in BACKEND_FOLDERS),
    ("codegen.adapter", ()),  # what a backend's adapter is: it names its framework, imported when called
    ("codegen.renaming", ()),
    ("codegen.namer", (*CORE, "codegen.renaming")),
    # it loads a backend's render by name, lays its source in 120 columns, and parses checkpoints arguments
    ("codegen.backends", (*PRINTING, "codegen.adapter", "codegen.namer", "runtime.schedule")),
    ("codegen", ()),  # codegen/__init__.py; a new module of codegen/ needs a rule of its own
    # codegen only through its registry; the runtime its generated modules run on
    ("app", ("derive", "documents", "codegen.backends", "app", "generated", "runtime")),
    ("runtime", ("runtime",)),  # what generated modules import: nothing of bptt but itself
    ("notebook", ("app",)),
    ("__main__", ("app",)),
)


def modules():
    """(dotted name under bptt, path) of every module of the package but generated/."""
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[0] in ("tests", "examples", "generated", "build") or parts[0].startswith("."):
            continue
        yield ".".join(part for part in parts if part != "__init__") or "__init__", path


def bptt_imports(tree):
    """The bptt modules (under bptt, dotted) a syntax tree imports anywhere: in a function, under
    `if TYPE_CHECKING:` too (a type checker's import is still a dependency the rules forbid or allow)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"a relative import at line {node.lineno}: the rules read absolute ones")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bptt":
            base = node.module.removeprefix("bptt").removeprefix(".")
            yield from (f"{base}.{alias.name}".strip(".") for alias in node.names)
        if isinstance(node, ast.Import):
            yield from (alias.name.removeprefix("bptt.") for alias in node.names if alias.name.startswith("bptt."))


def within(module, prefix):
    return prefix == "" or module == prefix or module.startswith(prefix + ".")


def room_of(module):
    return next((room, allowed) for room, allowed in RULES if within(module, room))


def wrong_imports(module, source):
    """The bptt modules the source of module imports that its room's rule does not allow."""
    room, allowed = room_of(module)
    return sorted(
        imported
        for imported in set(bptt_imports(ast.parse(source)))
        if not any(within(imported, prefix) for prefix in allowed) and not within(imported, room)
    )


def test_every_module_has_a_room():
    homeless = []
    for module, _ in modules():
        try:
            room_of(module)
        except StopIteration:
            homeless.append(module)
    assert homeless in ([], ["__init__"]), homeless


@pytest.mark.parametrize("module, path", list(modules()), ids=[name for name, _ in modules()])
def test_imports_go_one_way(module, path):
    if module == "__init__":
        return
    wrong = wrong_imports(module, path.read_text(encoding="utf-8"))
    room, allowed = room_of(module)
    assert not wrong, f"{module} ({room}) imports {wrong}; docs/architecture.md allows {allowed}"


def test_a_backend_folder_imports_no_other_backend():
    for module, path in modules():
        for name in BACKEND_FOLDERS:
            if within(module, f"codegen.{name}"):
                others = [f"codegen.{other}" for other in BACKEND_FOLDERS if other != name]
                imported = set(bptt_imports(ast.parse(path.read_text(encoding="utf-8"))))
                assert not [i for i in imported if any(within(i, other) for other in others)], module


def imported_modules(path):
    """Every module a file imports, dotted."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    return imported


@pytest.mark.parametrize("path", sorted((ROOT / "generated").glob("*.py")), ids=lambda path: path.name)
def test_generated_modules_import_only_their_framework_and_runtime(path):
    framework = {"": "numpy", "_torch": "torch", "_jax": "jax"}[
        next(s for s in ("_torch", "_jax", "") if path.stem.endswith(s))
    ]
    imported = imported_modules(path)
    if path.name == "__init__.py":
        assert not imported
        return
    tops = {name.split(".")[0] for name in imported}
    assert tops - set(sys.stdlib_module_names) == {framework, "bptt"}, (path.name, imported)
    ours = {name for name in imported if name.startswith("bptt.")}
    runtime = ("common", "schedule", "checkpoints", framework, f"{framework}_passes", f"{framework}_autograd")
    runtime += ("sweeps", f"{framework}_sweeps")  # a model with reverse-time states: its groups run one by one
    assert ours <= {f"bptt.runtime.{name}" for name in runtime}, ours


@pytest.mark.parametrize("path", sorted((ROOT / "runtime").glob("*.py")), ids=lambda path: path.name)
def test_the_runtime_imports_only_itself_and_its_framework(path):
    """runtime/<backend>.py and <backend>_*.py import their framework; common.py, schedule.py, checkpoints.py
    only the standard library (codegen reads them, and codegen imports no framework)."""
    framework = {"numpy": {"numpy"}, "torch": {"torch"}, "jax": {"jax"}}.get(path.stem.partition("_")[0], set())
    imported = imported_modules(path)
    tops = {name.split(".")[0] for name in imported} - set(sys.stdlib_module_names)
    assert tops <= framework | {"bptt"}, (path.name, tops)
    assert all(name.startswith("bptt.runtime.") for name in imported if name.startswith("bptt")), imported


def test_the_rules_catch_a_wrong_import():
    """A passes module importing a printer, or derive importing codegen, breaks the rules."""
    tree = ast.parse("from bptt.codegen.printing.printer import size_name\nfrom bptt.codegen import ir\n")
    _, allowed = room_of("codegen.passes.fuse")
    imported = set(bptt_imports(tree))
    assert imported == {"codegen.printing.printer.size_name", "codegen.ir"}
    assert [i for i in imported if not any(within(i, p) for p in allowed)] == ["codegen.printing.printer.size_name"]
    assert not any(within("codegen.ir", p) for p in room_of("derive.bptt")[1])
    _, allowed = room_of("app.bench.peers")
    assert any(within("codegen.backends.step_printer", p) for p in allowed)
    assert not any(within("codegen.printing.printer.RowPrinter", p) for p in allowed)


@pytest.mark.parametrize("guard", ["TYPE_CHECKING", "typing.TYPE_CHECKING"])
def test_a_type_checking_import_counts(guard):
    """An import for the type checker alone still breaks a rule: a pass naming a printer's class, or a cycle."""
    source = f"import typing\nfrom typing import TYPE_CHECKING\n\nif {guard}:\n"
    printer = source + "    from bptt.codegen.printing.printer import RowPrinter\n"
    assert wrong_imports("codegen.passes.fuse", printer) == ["codegen.printing.printer.RowPrinter"]
    assert wrong_imports("codegen.printing.printer", printer) == []
    back = set(bptt_imports(ast.parse(source + "    from bptt.app import a\n")))
    assert cycle({"app.a": {"app.b"}, "app.b": back}) == ["app.a", "app.b"]


def test_the_document_names_every_room():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for room in ("derive/", "documents/", "codegen/passes/", "codegen/printing/", "app/", "generated/", "runtime/"):
        assert room in text, room
    for room in ("bench/", "analysis/", "verify/"):
        assert (ROOT / "app" / room).is_dir() and room in text, room
    for name in BACKEND_FOLDERS:
        assert f"codegen/{name}/" in text or f"{name}/" in text, name


def test_no_room_imports_the_tests():
    """The tests import any room (bptt.tests.support holds what they share); no module of the package imports
    them, so the package runs without its tests."""
    importers = [
        module
        for module, path in modules()
        if any(within(name, "tests") for name in bptt_imports(ast.parse(path.read_text(encoding="utf-8"))))
    ]
    assert not importers
    assert [module for module, _ in modules() if within(module, "tests")] == []  # modules() reads the rooms only


def import_graph(room):
    """{module: the modules of the room it imports, anywhere in it (inside a function too)} for every module of room."""
    paths = {module: path for module, path in modules() if within(module, room)}

    def module_of(name):  # the longest prefix of a name that is a module: app.bench.bench.run -> app.bench.bench
        while name not in paths and "." in name:
            name = name.rpartition(".")[0]
        return name if name in paths else None

    graph = {}
    for module, path in paths.items():
        imported = {module_of(name) for name in bptt_imports(ast.parse(path.read_text(encoding="utf-8")))}
        graph[module] = imported - {None, module}
    return graph


def cycle(graph):
    """Modules each of which imports the next, and the last the first; [] if there is no such loop."""
    done, path = set(), []

    def visit(module):
        if module in path:
            return path[path.index(module) :]
        if module in done:
            return []
        path.append(module)
        found = next(filter(None, (visit(other) for other in sorted(graph[module]))), [])
        path.pop()
        done.add(module)
        return found

    return next(filter(None, (visit(module) for module in sorted(graph))), [])


def test_app_has_no_import_cycle():
    """No module of app/ imports, at any depth, a module that imports it back (a lazy import counts)."""
    assert cycle(import_graph("app")) == []


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set()}
    assert cycle(graph) == ["a", "b", "c"]
    assert cycle({**graph, "c": {"d"}}) == []
