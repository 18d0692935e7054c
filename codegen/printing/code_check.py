"""Whether laying a module out (printing/columns.py) kept its code: the same syntax tree, each docstring's text up
to its whitespace.

`same_code` parses both sources whole and compares the trees. `kept_code` proves the same thing from the changes
alone (columns.laid_out's {line: its lines}): it parses the source once and finds, for each changed line, the one
simple statement that owns it, alone on its lines (nothing of another statement or of a compound statement's
header on them, the line above not continued by a backslash). Such a statement's lines begin a logical line and
end one, so the tokenizer reads them the same in the module as alone: if their laid-out lines, parsed alone at
the statement's indentation, are one statement with its tree, the module's tree is unchanged. A changed line no
such statement owns (a compound statement's header, a comment between statements) is checked by `same_code`.
"""

import ast

from bptt.codegen.printing import collector
from bptt.codegen.printing.columns import applied

_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # the fields of a compound statement's blocks


def same_code(source, laid):
    """Whether two sources have the same syntax tree, each docstring's whitespace collapsed (tests check
    that `columns` changes nothing else)."""
    return laid == source or _same_tree(_parsed(source), _parsed(laid))


def kept_code(source, changes):
    """Whether the source with `changes` applied (columns.applied) is the same code as the source (same_code),
    parsing only the parts the changes lay out; the whole module where a change is in no one part."""
    lines = source.splitlines()
    moved = sorted(number for number, laid in changes.items() if laid != (lines[number - 1],))
    if not moved:
        return True
    if "\n".join(lines) + ("\n" if source.endswith("\n") else "") != source:  # a line break other than \n
        return _same_module(_parsed(source), applied(source, changes))
    tree = _parsed(source)
    owners = _owners(tree.body, {}, top=len(lines))
    checked = set()
    for number in moved:
        part = _part(owners, lines, number)
        if part in checked:
            continue
        if part is None or not _same_part(part, lines, changes):
            return _same_module(tree, applied(source, changes))
        checked.add(part)
    return True


def _owners(body, owners, top=None):
    """{line number: [(kind, node)]}: the lines of each simple statement ("statement", it), of each compound
    statement's header up to its block ("header", it), and the lines between two statements of a block, or
    around the module's (top: its last line), where only comments can be ("gap", None)."""
    starts = [_start(node) for node in body]
    after = [node.end_lineno + 1 for node in body]
    gaps = list(zip(after[:-1], starts[1:], strict=True))
    if top is not None and body:
        gaps += [(1, starts[0]), (after[-1], top + 1)]
    for first, last in gaps:
        for number in range(first, last):
            owners.setdefault(number, []).append(("gap", None))
    for node in body:
        blocks = [getattr(node, field) for field in _BLOCKS if hasattr(node, field)]
        if not blocks:
            _own(owners, "statement", node, node.lineno, node.end_lineno)
            continue
        if isinstance(node, ast.stmt) and _start(node.body[0]) > node.lineno:
            _own(owners, "header", node, node.lineno, _start(node.body[0]) - 1)
        for block in blocks:
            _owners(block, owners)
    return owners


def _start(node):
    """The first line of a statement, its decorators'."""
    return min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", ())])


def _own(owners, kind, node, first, last):
    for number in range(first, last + 1):
        owners.setdefault(number, []).append((kind, node))


def _part(owners, lines, number):
    """(kind, node, first line, last line) of the part alone on its lines that holds line `number`, or None:
    a simple statement, a compound statement's header, or a comment between statements."""
    on_line = owners.get(number, ())
    if len(on_line) != 1:
        return None
    kind, node = on_line[0]
    if kind == "gap":
        return (kind, node, number, number) if lines[number - 1].lstrip().startswith("#") else None
    first = node.lineno
    last = node.end_lineno if kind == "statement" else _start(node.body[0]) - 1
    if node.col_offset != len(_indent(lines[first - 1]).encode()):
        return None  # a header before it (`else: x = 1`)
    if first > 1 and lines[first - 2].rstrip().endswith("\\"):
        return None  # it goes on the line above
    if kind == "header":
        return (kind, node, first, last)
    after = lines[last - 1].encode()[node.end_col_offset :].decode().strip()
    return (kind, node, first, last) if not after or after.startswith("#") else None  # not `x = 1; \`


def _same_part(part, lines, changes):
    """Whether a part's lines laid out (changes) are the same code: comments stay comments; a statement (or a
    header, given a block) parsed alone at its indentation has its tree."""
    kind, node, first, last = part
    laid = [piece for k in range(first, last + 1) for piece in changes.get(k, (lines[k - 1],))]
    if kind == "gap":
        return all(piece.lstrip().startswith("#") for piece in laid)
    indent = _indent(lines[first - 1])
    code = next((line for line in laid if line.strip() and not line.lstrip().startswith("#")), None)
    if code is None or _indent(code) != indent or laid[-1].rstrip().endswith("\\"):
        return False
    if kind == "header":
        laid = [*laid, indent + " pass"]
    try:
        module = _parsed("if 1:\n" + "\n".join(laid) if indent else "\n".join(laid))
    except SyntaxError:
        return False
    body = module.body[0].body if indent and len(module.body) == 1 else module.body
    if len(module.body) != 1 or len(body) != 1:
        return False
    if kind == "statement":
        return _same_tree(node, body[0])
    fields = [field for field in node._fields if field not in _BLOCKS and field != "decorator_list"]
    return type(body[0]) is type(node) and _same_tree(
        [getattr(node, f) for f in fields], [getattr(body[0], f) for f in fields]
    )


def _parsed(source):
    """ast.parse(source) with the garbage collector paused (printing/collector.py): a syntax tree holds no cycles,
    and the collections its many new nodes set off took longer than the parse."""
    with collector.paused():
        return ast.parse(source)


def _indent(line):
    return line[: len(line) - len(line.lstrip())]


def _same_module(tree, laid):
    try:
        return _same_tree(tree, _parsed(laid))
    except SyntaxError:
        return False


def _same_tree(tree, other):
    """Whether two syntax trees are equal field by field (positions aside, as ast.dump shows them), a string
    statement's (a docstring's) text up to its whitespace. Compared pair by pair: dumping both trees took
    longer than parsing them; a field holding a name, a number or None compared where it is met."""
    pairs = [(tree, other)]
    while pairs:
        one, two = pairs.pop()
        if type(one) is not type(two):
            return False
        if isinstance(one, ast.Expr) and _is_text(one.value) and _is_text(two.value):
            pairs += [(one.value.kind, two.value.kind), (one.value.value.split(), two.value.value.split())]
        elif isinstance(one, ast.AST):
            for field in one._fields:
                mine, theirs = getattr(one, field, None), getattr(two, field, None)
                if type(mine) in _PLAIN:
                    if type(mine) is not type(theirs) or mine != theirs:
                        return False
                else:
                    pairs.append((mine, theirs))
        elif isinstance(one, list):
            if len(one) != len(two):
                return False
            pairs += zip(one, two, strict=True)
        elif one != two or (isinstance(one, float | complex) and repr(one) != repr(two)):  # 0.0 == -0.0
            return False
    return True


_PLAIN = {str, int, bool, type(None)}  # values equal by ==, as _same_tree compares the others


def _is_text(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
