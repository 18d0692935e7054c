"""A backend's runtime (runtime/numpy.py, ...) and the framework-free runtime all backends share
(runtime/options.py, common.py, checks.py, schedule.py, checkpoints.py), split into their top-level definitions by
Python's own parser, never imported (codegen imports no framework). A generated module imports the definitions its code
calls from the runtime, one import line per runtime module; a standalone one (`bptt codegen --standalone`)
carries those definitions and those they call instead, nothing else, and imports nothing of bptt."""

import ast
import functools
import pathlib
import sys
from dataclasses import dataclass

CODEGEN = pathlib.Path(__file__).parent.parent  # codegen/: a backend folder each, and printing/
RUNTIME = CODEGEN.parent / "runtime"  # the runtime's files, read as text


@dataclass(frozen=True)
class Definition:
    name: str
    source: str
    reads: frozenset  # every name its code reads
    takes_out: bool  # a function with an `out` parameter
    module: str  # the runtime module that defines it (bptt.runtime.numpy)


class Helpers:
    """The definitions and imports of runtime files, e.g. runtime/common.py then runtime/numpy.py: a name's
    last definition wins (a backend's own), and the order is the files' (what a backend's classes and
    module-level code read comes first)."""

    def __init__(self, *files):
        self.imports = {}  # bound name -> import line
        self.definitions = {}
        for path in files:
            imports, definitions = _read(path.read_text(encoding="utf-8"), f"bptt.runtime.{path.stem}")
            self.imports.update(imports)
            self.definitions.update(definitions)

    def closure(self, names):
        """The named definitions and every definition they read, in the files' order."""
        wanted, todo = set(), list(names)
        while todo:
            name = todo.pop()
            if name in wanted:
                continue
            if name not in self.definitions:
                raise KeyError(f"the runtime files have no definition {name!r}")
            wanted.add(name)
            todo += [read for read in self.definitions[name].reads if read in self.definitions]
        return [d for d in self.definitions.values() if d.name in wanted]

    def source(self, names, extra=(), standalone=True):
        """(import blocks, the definitions' source) for a module whose code calls `names` (and needs the
        `extra` import lines): the standard library's import lines, then the others', each block one string
        of sorted lines. standalone: the definitions and those they call, copied; else the runtime's import
        lines of the named definitions (and no source)."""
        if not standalone:
            imported = [self.definitions[name] for name in names]
            numpy = [self.imports["np"]] if "np" in self.imports else []  # the NumPy module's own code uses it
            return [*_blocks(*numpy, *extra), _runtime_imports(imported)], ""
        chosen = self.closure(names)
        reads = set().union(*(d.reads for d in chosen)) | {"np"}
        lines = {line for name, line in self.imports.items() if name in reads} | set(extra)
        return _blocks(*lines), "\n\n\n".join(d.source for d in chosen)

    @property
    def accepts_out(self):
        return frozenset(name for name, d in self.definitions.items() if d.takes_out)


def _blocks(*lines):
    """Import lines in blocks as isort sorts them: the standard library's, then the others', each one string;
    in each, `import x` lines first, then one `from x import a, b` line per module."""
    plain = {line for line in lines if line.startswith("import ")}
    imported = {}  # module -> the names imported from it
    for line in set(lines) - plain:
        _, module, _, names = line.split(" ", 3)
        imported.setdefault(module, set()).update(names.split(", "))
    froms = [f"from {module} import {', '.join(sorted(names, key=_isort_key))}" for module, names in imported.items()]
    blocks = []
    for standard in (True, False):
        block = [
            line
            for line in plain | set(froms)
            if (line.split()[1].partition(".")[0] in sys.stdlib_module_names) == standard
        ]
        blocks.append(sorted(block, key=lambda line: (line.startswith("from "), line.split()[1])))
    return ["\n".join(block) for block in blocks if block]


def _runtime_imports(definitions):
    """The import lines of the runtime's definitions, one per runtime module in 120 columns, and one per public
    name (the generated module's API)."""
    lines = []
    for module in sorted({d.module for d in definitions}):
        names = sorted({d.name for d in definitions if d.module == module}, key=_isort_key)
        private = [name for name in names if name.startswith("_")]
        line = f"from {module} import {', '.join(private)}"
        if len(line) > 120:
            line = f"from {module} import (\n" + "".join(f"    {name},\n" for name in private) + ")"
        entries = [(_isort_key(private[0]), line)] if private else []
        # the module's own API (clip_grads, ...): re-exported, as PEP 484 spells it; in isort's order of first names
        entries += [(_isort_key(name), f"from {module} import {name} as {name}") for name in names if name[0] != "_"]
        lines += [line for _, line in sorted(entries)]
    return "\n".join(lines)


def _isort_key(name):
    """isort's order of imported names: constants, then classes, then the rest, each case-insensitively."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def _read(text, module):
    """The imports (bound name -> import line) and top-level definitions (by name) of one runtime file."""
    tree = ast.parse(text)
    lines = text.splitlines()
    imports, definitions = {}, {}
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        source = "\n".join(lines[first - 1 : node.end_lineno])
        if isinstance(node, ast.ImportFrom) and node.module.partition(".")[0] == "bptt":
            continue  # another runtime file: its definitions are read from it
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports[alias.asname or alias.name] = source
        elif isinstance(node, ast.ImportFrom):  # one line per name: _blocks joins those a module needs
            for alias in node.names:
                spelled = alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
                imports[alias.asname or alias.name] = f"from {node.module} import {spelled}"
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Assign)):
            name = node.targets[0].id if isinstance(node, ast.Assign) else node.name
            takes_out = isinstance(node, ast.FunctionDef) and any(a.arg == "out" for a in node.args.args)
            reads = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
            definitions[name] = Definition(name, source, reads, takes_out, module)
    return imports, definitions


def namespace(names=None, backend="numpy", scope=None):
    """A scope (a new dict, or scope) to evaluate printed code in: the backend's imports and the named helpers
    (all if None), with those they call. (A generated module carries only the helpers its own code calls.)"""
    chosen = helpers(backend)
    imports, source = chosen.source(list(chosen.definitions) if names is None else names)
    scope = {} if scope is None else scope
    exec(compile("\n".join(imports) + "\n\n" + source, f"<{backend} helpers>", "exec"), scope)
    return scope


@functools.cache
def helpers(backend="numpy"):
    """The shared runtime (options.py: the option values; common.py; checks.py: a call's checks; schedule.py: the
    checkpoint schedule; checkpoints.py: the passes that follow it), then the backend's own (its padded batches, its
    passes and autograd glue, if apart), whose definitions win; then what runs a model with reverse-time states
    (sweeps.py and its peers sweep*.py, the backend's <backend>_sweeps.py)."""
    return Helpers(*runtime_files(backend))


def runtime_files(backend, sweeps=True):
    """The runtime files helpers(backend) reads, in its order; sweeps: with those of reverse-time states."""
    names = ("options.py", "common.py", "checks.py", "schedule.py", "checkpoints.py", f"{backend}.py")
    names += (f"{backend}_padding.py", f"{backend}_passes.py")
    names += (f"{backend}_autograd.py",)  # torch's
    if sweeps:
        names += (*sorted(path.name for path in RUNTIME.glob("sweep*.py")), f"{backend}_sweeps.py")
    return [RUNTIME / name for name in names if (RUNTIME / name).exists()]
