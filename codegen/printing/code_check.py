"""Whether laying a module out (printing/columns.py) kept its code: the same syntax tree, each docstring's text up
to its whitespace.

`same_code` parses both sources whole and compares the trees. `kept_code` proves the same thing from the changes
alone (columns.laid_out's {line: its lines}), without parsing the module: it reads the source's strings, comments
and brackets as Python's tokenizer does (_LEXED) to find the lines that begin a logical line (outside any bracket,
string or backslash continuation), and so the logical line holding each changed line. Such a part is read by the
tokenizer the same in the module as alone at its indentation, ending where it ends. Its laid-out lines keep the
code if they are one logical line at that indentation with the same tokens (line breaks in brackets and comments
aside: nothing to parse), or a docstring of the same words; else if the part is one simple statement (or a
compound statement's header, given a block) and its laid-out lines, parsed alone at that indentation, are one
with its tree. A changed line of comments stays comments. A part that is none of these (`else: y = 2`, a
decorator), or a source the reading leaves in doubt, is checked by `same_code`.
"""

import ast
import bisect
import functools
import re

from bptt.codegen.printing import collector
from bptt.codegen.printing.columns import applied

_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # the fields of a compound statement's blocks
# What Python's tokenizer reads from the leftmost hash or quote on, as a whole: a comment; a string (any prefix,
# triple-quoted or not, a backslash escaping the character after it, a newline too); and a backslash ending a line
# of code, which joins the next line to it. Nothing else in Python's code holds a quote, a hash or a backslash.
_LEXED = re.compile(
    r"#[^\n]*+"
    r"|'''(?:[^'\\]++|\\[\s\S]|'(?!''))*+'''"
    r'|"""(?:[^"\\]++|\\[\s\S]|"(?!""))*+"""'
    r"|'(?:[^'\\\n]++|\\[\s\S])*+'"
    r'|"(?:[^"\\\n]++|\\[\s\S])*+"'
    r"|\\\n"
)
_IN_STRING, _CONTINUED = "\x01", "\x02"  # marks of a line that begins inside a string, or after a backslash


def same_code(source, laid):
    """Whether two sources have the same syntax tree, each docstring's whitespace collapsed (tests check
    that `columns` changes nothing else)."""
    return laid == source or _same_tree(_parsed(source), _parsed(laid))


def kept_code(source, changes):
    """Whether the source with `changes` applied (columns.applied) is the same code as the source (same_code),
    parsing only the logical lines the changes lay out; both modules whole where a change is in no such part."""
    lines = source.splitlines()
    moved = sorted(number for number, laid in changes.items() if laid != (lines[number - 1],))
    if not moved:
        return True
    starts = _logical_starts(source) if "\n".join(lines) + ("\n" if source.endswith("\n") else "") == source else None
    checked = set()
    for number in moved:
        if starts is None:
            return _same_module(source, changes)
        after = bisect.bisect_right(starts, number)
        part = (starts[after - 1], starts[after] - 1 if after < len(starts) else len(lines))
        if part in checked:
            continue
        if not _same_part(part, lines, changes):
            return _same_module(source, changes)
        checked.add(part)
    return True


def _logical_starts(source):
    """The numbers of the lines that begin a logical line, as Python's tokenizer reads the source: at no bracket's
    depth, in no string, after no backslash; None if the source holds what _LEXED leaves in doubt (a quote it
    found no end of, a backslash in code, a bracket closed before it opened, one left open)."""
    if _IN_STRING in source or _CONTINUED in source:
        return None
    code = _LEXED.sub(_mark, source)
    if any(c in code for c in "\"'#\\"):
        return None
    starts, depth = [], 0
    for number, line in enumerate(code.split("\n"), start=1):
        if depth == 0 and not line.startswith((_IN_STRING, _CONTINUED)):
            starts.append(number)
        depth += line.count("(") + line.count("[") + line.count("{")
        depth -= line.count(")") + line.count("]") + line.count("}")
        if depth < 0:
            return None
    return starts if depth == 0 else None


def _mark(found):
    """A string or comment read by _LEXED, as it stands in code: a comment gone, a string a name, each line a
    string goes on to (or a backslash joins) marked at its beginning."""
    text = found.group()
    if text[0] == "#":
        return ""
    if text == "\\\n":
        return "\n" + _CONTINUED
    return "S" + ("\n" + _IN_STRING) * text.count("\n")


def _same_part(part, lines, changes):
    """Whether a logical line's lines laid out (changes) are the same code: comments stay comments; a simple
    statement (or a compound statement's header, given a block) parsed alone at its indentation has its tree."""
    first, last = part
    laid = tuple(piece for k in range(first, last + 1) for piece in changes.get(k, (lines[k - 1],)))
    return _same_lines(tuple(lines[first - 1 : last]), laid)


@functools.lru_cache(maxsize=8192)  # every backend, and every model, lays many of the same statements out alike
def _same_lines(written, laid):
    """_same_part's answer for a logical line's written lines and their laid-out lines."""
    if all(_is_comment(line) for line in written):
        return all(_is_comment(piece) for piece in laid)
    indent = _indent(written[0])
    code = next((line for line in laid if line.strip() and not _is_comment(line)), None)
    if code is None or _indent(code) != indent or laid[-1].rstrip().endswith("\\"):
        return False
    if _same_tokens(written, laid):
        return True
    for header in (False, True):
        statement = _alone(written, indent, header)
        if statement is not None:
            other = _alone(laid, indent, header)
            return other is not None and _same_tree(statement, other)
    return False


def _same_tokens(written, laid):
    """Whether the laid-out lines are one logical line with the written lines' tokens (its layout aside: line breaks
    in brackets, comments), or both a string statement (a docstring) of the same words: then the parser reads the
    same, nothing parsed. False if they are not shown to be."""
    starts = _logical_starts("\n".join(laid))
    if starts is None or sum(_is_code(laid[k - 1]) for k in starts) != 1:
        return False
    one, other = _token_text("\n".join(written)), _token_text("\n".join(laid))
    if one is None or other is None:
        return False
    if one == other:
        return True
    texts = [found[1] for found in (one, other) if len(found) == 3 and not found[0] and not found[2]]
    if len(texts) != 2 or texts[0][:3] not in ('"""', "'''") or texts[1][:3] != texts[0][:3] or "\\" in "".join(texts):
        return False
    return texts[0][3:-3].split() == texts[1][3:-3].split()  # no prefix, no escape: the text is the value


def _token_text(text):
    """A logical line's tokens apart from their layout: (code, string, code, ..., code), each string as written, each
    stretch of code between two with its comments gone, each run of whitespace one space, none beside a bracket or
    a comma (a token alone) or at either end; None if a backslash joins two of its lines."""
    pieces, code, at = [], [], 0
    for found in _LEXED.finditer(text):
        code.append(text[at : found.start()])
        at, piece = found.end(), found.group()
        if piece[0] == "\\":
            return None
        if piece[0] == "#":
            code.append(" ")
        else:
            pieces += [_spaced("".join(code)), piece]
            code = []
    pieces.append(_spaced("".join(code) + text[at:]))
    pieces[0], pieces[-1] = pieces[0].lstrip(), pieces[-1].rstrip()
    return tuple(pieces)


def _spaced(code):
    code = _SPACE.sub(" ", code)
    for alone in "()[]{},":  # (str.replace: a few times faster than one pattern)
        code = code.replace(" " + alone, alone).replace(alone + " ", alone)
    return code


_SPACE = re.compile(r"[ \t\n]+")  # whitespace as Python's tokenizer reads it (a form feed left as it is)


def _alone(lines, indent, header):
    """The one statement the lines are, parsed alone at their indentation: a simple statement, or (header) a
    compound statement's header given the block `pass`; None if they are not one."""
    lines = [*lines, indent + " pass"] if header else lines
    try:
        module = _parsed("if 1:\n" + "\n".join(lines) if indent else "\n".join(lines))
    except SyntaxError:
        return None
    body = module.body[0].body if indent and len(module.body) == 1 else module.body
    if len(module.body) != 1 or len(body) != 1:
        return None
    compound = any(hasattr(body[0], field) for field in _BLOCKS)
    return body[0] if compound == header else None


def _is_comment(line):
    return line.lstrip().startswith("#")


def _is_code(line):
    return bool(line.strip()) and not _is_comment(line)


def _parsed(source):
    """ast.parse(source) with the garbage collector paused (printing/collector.py): a syntax tree holds no cycles,
    and the collections its many new nodes set off took longer than the parse."""
    with collector.paused():
        return ast.parse(source)


def _indent(line):
    return line[: len(line) - len(line.lstrip())]


def _same_module(source, changes):
    """same_code of the source and its layout, a layout that no longer parses counted as changed code."""
    try:
        return _same_tree(_parsed(source), _parsed(applied(source, changes)))
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
