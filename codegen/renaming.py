"""Give some of a module's names other spellings, scope by scope, by Python's own scoping rules: the
source-editing half of codegen/namer.py (which decides the spellings).

A name bound in a function is renamed in that function (and the functions inside it that read it) only
where `clashes(name, function)` says so; a module-level name or a builtin is renamed everywhere when some
top-level function reading it clashes. A class body's names (methods, attributes) are never renamed.
"""

import ast
import builtins
import re

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
SCOPES = FUNCTIONS + (ast.ClassDef,)


def code_edits(tree, nodes, lines, spellings, clashes, marker, whole=False):
    """((line, column, old, new) edits, {builtin: its spelling}) renaming each name of spellings where
    clashes(name, function node) holds; function: the function binding the name, or for a module-level
    name, the top-level function (or method) reading it; nodes: the tree's, ast.walk'd. Only the module's
    statements where a name of spellings meets the model's (marker + name + marker) decide; the others
    (helpers, imports) follow a module-level name. Edits None if tree is not the whole module (`whole`) and
    a module-level name or a function's argument (which a call elsewhere may pass by keyword) is renamed."""
    words = {s: set(re.findall(r"\w+", "".join(lines[_first_line(s) - 1 : s.end_lineno]))) for s in tree.body}
    meeting = [s for s in tree.body if any(n in words[s] and f"{marker}{n}{marker}" in words[s] for n in spellings)]
    finder = _Finder(tree, lines, spellings)
    for statement in meeting:
        finder.walk(statement, [tree], None)
    renamed = set()
    for name, scope, top, _ in finder.found:
        deciding = top if scope is tree else scope
        if deciding is not None and not isinstance(scope, ast.ClassDef) and clashes(name, deciding):
            renamed.add((name, scope))
    edits = [edit for name, scope, _, edit in finder.found if (name, scope) in renamed]
    module_level = {name for name, scope in renamed if scope is tree}
    arguments = any(
        isinstance(scope, FUNCTIONS) and name in {a.arg for a in _arguments(scope)} for name, scope in renamed
    )
    if not whole and (module_level or arguments):
        return None, None
    if module_level:
        others = _Finder(tree, lines, {name: spellings[name] for name in module_level}, finder.bound)
        for statement in tree.body:
            if statement not in meeting and module_level & words[statement]:
                others.walk(statement, [tree], None)
        edits += [edit for _, scope, _, edit in others.found if scope is tree]
    edits += finder.keyword_edits(renamed, nodes)
    builtin = {name for name in module_level if name not in finder.bound_of(tree)}
    return edits, {name: spellings[name] for name in builtin if hasattr(builtins, name)}


def identifier_places(nodes, lines):
    """(line, column, name) of every identifier the code writes among nodes (a module's, ast.walk'd):
    names, arguments, keywords, attributes, defs and classes (not an import's: those hold no model's name)."""
    for node in nodes:
        kind = type(node)
        if kind is ast.Name:
            yield node.lineno, _column(lines[node.lineno - 1], node.col_offset), node.id
        elif kind is ast.arg or kind is ast.keyword and node.arg is not None:
            yield node.lineno, _column(lines[node.lineno - 1], node.col_offset), node.arg
        elif kind is ast.Attribute:
            end = _column(lines[node.end_lineno - 1], node.end_col_offset)
            yield node.end_lineno, end - len(node.attr), node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            line = lines[node.lineno - 1]
            yield node.lineno, re.search(rf"\b(def|class)\s+({re.escape(node.name)})\b", line).start(2), node.name


def bound_names(nodes):
    """The names imports and global statements bind among nodes (which identifier_places leaves out)."""
    found = set()
    for node in nodes:
        if isinstance(node, ast.alias):
            found.add((node.asname or node.name).partition(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found |= set(node.names)
    return found


def top_statements(lines):
    """(first, last) line numbers of each top-level statement of a module as the printers lay it out: one
    starts at a line at column 0 that is not inside a triple-quoted string, not a closing bracket and not a
    comment; a decorator's statement holds its def."""
    starts, inside, decorating = [], False, False
    for number, line in enumerate(lines, start=1):
        if not inside and line[:1] not in ("", " ", "\t", ")", "]", "}", "#"):
            if not decorating:
                starts.append(number)
            decorating = line.startswith("@")
        inside ^= line.count('"""') % 2 == 1
    return list(zip(starts, [start - 1 for start in starts[1:]] + [len(lines)], strict=True))


def parse_statements(lines, statements):
    """A module of these top-level statements alone, parsed at their lines (one parse, the other lines blank)."""
    kept = [""] * len(lines)
    for first, last in statements:
        kept[first - 1 : last] = lines[first - 1 : last]
    return ast.parse("\n".join(kept))


def walk(node):
    """Every node under node (itself first), as ast.walk's, in a few times less time (no generator per node)."""
    found, index = [node], 0
    while index < len(found):
        _add_children(found[index], found)
        index += 1
    return found


def _add_children(node, found):
    """Append node's children to found, in ast.iter_child_nodes' order."""
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, list):
            found += [item for item in value if isinstance(item, ast.AST)]
        elif isinstance(value, ast.AST):
            found.append(value)


def module_names(lines, statements):
    """The names the module's top-level statements bind: defs, classes, assignments, imports."""
    found = set()
    for first, last in statements:
        line = lines[first - 1]
        while line.startswith("@"):
            first += 1
            line = lines[first - 1]
        if match := re.match(r"(?:async\s+)?(?:def|class)\s+(\w+)|(\w+)\s*(?::[^=]*)?=", line):
            found.add(match[1] or match[2])
        elif line.startswith(("import ", "from ")):  # an import may run over several lines
            found |= bound_names(walk(ast.parse("\n".join(lines[first - 1 : last]))))
    return found


def _first_line(statement):
    return min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])


class _Finder:
    """Every occurrence of a name of spellings, with the scope it resolves to."""

    def __init__(self, tree, lines, spellings, bound=None):
        self.tree, self.lines, self.spellings = tree, lines, spellings
        self.bound = {} if bound is None else bound  # scope: the names it binds, found as asked
        self.found = []  # (name, the scope it resolves to, the top-level function holding it, edit)

    def bound_of(self, scope):
        if scope not in self.bound:
            self.bound[scope] = _bound(scope)
        return self.bound[scope]

    def walk(self, node, chain, top):
        """node and everything under it; chain: the scopes around it; top: the top-level function holding it."""
        stack = [node]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind in SCOPES:
                self.scope(node, chain, top)
                continue
            if kind is ast.Name and node.id in self.spellings:
                self.add(node.id, chain, top, _at(self.lines, node, node.id, self.spellings[node.id]))
            elif kind is ast.alias and (node.asname or node.name) in self.spellings:
                bound = node.asname or node.name
                self.add(bound, chain, top, _alias_edit(self.lines, node, self.spellings[bound]))
            elif kind is ast.ExceptHandler and node.name in self.spellings:
                raise NotImplementedError(f"namer: an except clause binds {node.name!r}")
            _add_children(node, stack)

    def scope(self, node, chain, top):
        if not isinstance(node, ast.Lambda) and node.name in self.spellings:
            line = self.lines[node.lineno - 1]
            column = re.search(rf"\b(def|class)\s+({re.escape(node.name)})\b", line).start(2)
            self.add(node.name, chain, top, (node.lineno, column, node.name, self.spellings[node.name]))
        for outer in _outer_parts(node):
            self.walk(outer, chain, top)
        inner_top = top if top is not None or isinstance(node, ast.ClassDef) else node
        for arg in _arguments(node):
            if arg.arg in self.spellings:
                self.found.append((arg.arg, node, inner_top, _at(self.lines, arg, arg.arg, self.spellings[arg.arg])))
        for inner in _inner_parts(node):
            self.walk(inner, chain + [node], inner_top)

    def add(self, name, chain, top, edit):
        self.found.append((name, self.resolve(name, chain), top, edit))

    def resolve(self, name, chain):
        """The scope a name read or bound in the innermost of chain belongs to (the module: a global or a builtin)."""
        for depth, scope in enumerate(reversed(chain)):
            if isinstance(scope, ast.ClassDef) and depth > 0:
                continue  # a method does not see its class body's names
            if scope is not chain[0] and name in self.bound_of(scope):
                return scope
        return chain[0]

    def keyword_edits(self, renamed, nodes):
        """A keyword argument of a call to one of the module's functions whose parameter of that name is renamed."""
        renamed_args = {}
        for name, scope in renamed:
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in {
                a.arg for a in _arguments(scope)
            }:
                renamed_args.setdefault(scope.name, set()).add(name)
        if not renamed_args:
            return []
        edits = []
        for call in nodes:
            if isinstance(call, ast.Call) and call.keywords:
                func = call.func
                callee = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                for keyword in call.keywords:
                    if keyword.arg in renamed_args.get(callee, ()):
                        edits.append(_at(self.lines, keyword, keyword.arg, self.spellings[keyword.arg]))
        return edits


def _outer_parts(node):
    """What a def, lambda or class evaluates in the scope around it: decorators, defaults, bases."""
    if isinstance(node, ast.ClassDef):
        return node.decorator_list + node.bases + node.keywords
    args = node.args
    return getattr(node, "decorator_list", []) + args.defaults + [d for d in args.kw_defaults if d is not None]


def _inner_parts(node):
    if isinstance(node, ast.Lambda):
        return [node.body]
    return node.body


def _arguments(node):
    if not isinstance(node, FUNCTIONS):
        return []
    args = node.args
    return args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a is not None]


def _bound(scope):
    """The names a scope binds: its arguments, assignments, imports, defs and classes (not global ones)."""
    names, declared = {a.arg for a in _arguments(scope)}, set()
    stack = list(_inner_parts(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            names |= set() if isinstance(node, ast.Lambda) else {node.name}
            stack += _outer_parts(node)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).partition(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared |= set(node.names)
        _add_children(node, stack)
    return names - declared


def _at(lines, node, old, new):
    """The edit of old at node's place (its column in characters, not UTF-8 bytes)."""
    return node.lineno, _column(lines[node.lineno - 1], node.col_offset), old, new


def _column(line, offset):
    """The column in characters of a UTF-8 byte offset into line."""
    return offset if line.isascii() else len(line.encode()[:offset].decode())


def _alias_edit(lines, node, new):
    """`import numpy as np` -> `import numpy as _np`; `import math` -> `import math as _math` (`import a.b`
    binds a, which no model's name wraps: a module's name holds no dot)."""
    line = lines[node.lineno - 1].encode()
    start = len(line[: node.col_offset].decode())
    text = line[node.col_offset : node.end_col_offset].decode()
    return node.lineno, start, text, f"{node.name} as {new}"


def apply(source, edits):
    """The source with each (line, column, old, new) edit made, checking that old is there."""
    lines = source.splitlines(keepends=True)
    for row, col, old, new in sorted(set(edits), reverse=True):
        line = lines[row - 1]
        if line[col : col + len(old)] != old:
            raise AssertionError(f"namer: {old!r} is not at line {row}, column {col}: {line!r}")
        lines[row - 1] = line[:col] + new + line[col + len(old) :]
    return "".join(lines)
