"""A backend's helpers module (numpy/helpers.py, ...) and the framework-free ones all backends share
(printing/common_helpers.py; for bounded memory printing/schedule.py and printing/checkpointed.py), split
into their top-level definitions by Python's own parser, never imported: a generated module carries the
definitions its code calls and those they call, nothing else.

What a generated module defines for itself is not copied: the files' imports of each other (`from bptt
...`) and their annotated stand-ins (`PARAMS: tuple = ()`) only make each file import and lint alone."""

import ast
import functools
import pathlib
import sys
from dataclasses import dataclass

CODEGEN = pathlib.Path(__file__).parent.parent  # codegen/: a backend folder each, and printing/


@dataclass(frozen=True)
class Definition:
    name: str
    source: str
    reads: frozenset  # every name its code reads
    takes_out: bool  # a function with an `out` parameter


class Helpers:
    """The definitions and imports of helpers files, e.g. numpy/helpers.py then
    printing/common_helpers.py: a name's first definition wins, and the order is the files'."""

    def __init__(self, *texts):
        self.imports = {}  # bound name -> import line
        self.definitions = {}
        for text in texts:
            imports, definitions = _read(text)
            self.imports.update(imports)
            for name, definition in definitions.items():
                self.definitions.setdefault(name, definition)

    def closure(self, names):
        """The named definitions and every definition they read, in the files' order."""
        wanted, todo = set(), list(names)
        while todo:
            name = todo.pop()
            if name in wanted:
                continue
            if name not in self.definitions:
                raise KeyError(f"the helpers files have no definition {name!r}")
            wanted.add(name)
            todo += [read for read in self.definitions[name].reads if read in self.definitions]
        return [d for d in self.definitions.values() if d.name in wanted]

    def source(self, names, extra=()):
        """(import blocks, the definitions' source) for a module whose code calls `names` (and needs the
        `extra` import lines): the standard library's import lines, then the others', each block one string
        of sorted lines."""
        chosen = self.closure(names)
        reads = set().union(*(d.reads for d in chosen)) | {"np"}
        lines = sorted({line for name, line in self.imports.items() if name in reads} | set(extra))
        standard = [line for line in lines if line.split()[1].partition(".")[0] in sys.stdlib_module_names]
        blocks = (standard, [line for line in lines if line not in standard])
        return ["\n".join(block) for block in blocks if block], "\n\n\n".join(d.source for d in chosen)

    @property
    def accepts_out(self):
        return frozenset(name for name, d in self.definitions.items() if d.takes_out)


def _read(text):
    """The imports (bound name -> import line) and top-level definitions (by name) of one helpers file."""
    tree = ast.parse(text)
    lines = text.splitlines()
    imports, definitions = {}, {}
    for node in tree.body:
        source = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if isinstance(node, ast.ImportFrom) and node.module.partition(".")[0] == "bptt":
            continue  # another helpers file: the module carries its definitions itself
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                imports[alias.asname or alias.name] = source
        elif isinstance(node, (ast.FunctionDef, ast.Assign)):
            name = node.name if isinstance(node, ast.FunctionDef) else node.targets[0].id
            takes_out = isinstance(node, ast.FunctionDef) and any(a.arg == "out" for a in node.args.args)
            reads = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
            definitions[name] = Definition(name, source, reads, takes_out)
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
    """The backend's own helpers file, then the shared ones for the names the backend does not define
    (printing/schedule.py: the checkpoint schedule; printing/checkpointed.py: the passes that follow it)."""
    files = [CODEGEN / backend / "helpers.py"]
    files += [CODEGEN / "printing" / name for name in ("common_helpers.py", "schedule.py", "checkpointed.py")]
    return Helpers(*(path.read_text(encoding="utf-8") for path in files))
