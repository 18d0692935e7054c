"""Lay a rendered module out in WIDTH columns, as a person (or a formatter) would break its long lines.

The printers write one statement per line, with its equation as a trailing comment; the lines a model
makes long are laid out here, by Python's own tokenizer, never by editing code:
- a trailing comment that does not fit goes on its own lines above the statement, wrapped at words;
- a long comment line, or a long line of a docstring, is wrapped at words;
- long code is broken inside its brackets: the right-hand side of an assignment (or a return) is put in
  parentheses and broken before its top-level + and -, or at its commas; a call or a display is opened
  after its last top-level bracket, one argument (or element) per line, each laid out again.
Nothing else changes: the syntax tree is the same, docstrings up to their whitespace (`same_code`,
which the tests check on every generated module).
"""

import ast
import io
import textwrap
import tokenize

WIDTH = 120
STEP = "    "
ASSIGN = {"=", "+=", "-=", "*=", "/=", "@=", "**=", "//=", "%=", "|=", "&=", "^="}
SPLITTING = (("+", "-"), ("*", "@", "/"))  # the binary operators a long expression is broken before, in turn
OPEN, CLOSE = ("(", "[", "{"), (")", "]", "}")
SHORT = 12  # the inside of a bracket shorter than this stays on its line when no single break fits


def columns(source, width=WIDTH):
    """The source with every line laid out in `width` columns where it can be (a long string stays whole)."""
    lines = source.splitlines()
    if all(len(line) <= width for line in lines):
        return source
    docstrings = _docstring_lines(source)
    out = []
    for number, line in enumerate(lines, start=1):
        if len(line) <= width:
            out.append(line)
        elif number in docstrings:
            out += _prose(line, width)
        else:
            out += _statement(line, width)
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def same_code(source, laid):
    """Whether two sources have the same syntax tree, each docstring's whitespace collapsed (tests check
    that `columns` changes nothing else)."""
    return _tree(laid) == _tree(source)


def _docstring_lines(source):
    """The numbers of the lines inside a docstring: the module's, a function's or a class's."""
    lines, bodies = set(), [ast.parse(source)]
    while bodies:
        node = bodies.pop()
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines |= set(range(first.lineno, first.end_lineno + 1))
        bodies += [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return lines


def _prose(line, width):
    """A long line of a docstring wrapped at words, each piece at the line's indentation."""
    indent = line[: len(line) - len(line.lstrip())]
    return textwrap.wrap(line.strip(), width - len(indent), initial_indent=indent, subsequent_indent=indent) or [line]


def _statement(line, width):
    """A long line of code: its comment above it if that makes it fit (or if it is a comment alone), the
    code broken in its brackets."""
    indent = line[: len(line) - len(line.lstrip())]
    tokens = _tokens(line.strip())
    if tokens is None:
        return [line]
    comment = next((tok for tok in tokens if tok.type == tokenize.COMMENT), None)
    code = line.strip()[: comment.start[1]].rstrip() if comment else line.strip()
    above = _comment(comment.string, indent, width) if comment else []
    if not code:
        return above
    return above + _code(code, indent, width)


def _comment(text, indent, width):
    body = text.lstrip("#").strip()
    wrapped = textwrap.wrap(body, max(width - len(indent) - 2, 20), break_long_words=False, break_on_hyphens=False)
    return [f"{indent}# {piece}" for piece in wrapped]


def _tokens(code):
    """The tokens of one line of code, or None if it is not a whole line (an open bracket, a string going on)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT)
    kept = _strings_whole([tok for tok in tokens if tok.type not in skip])
    return kept if all(tok.start[0] == 1 for tok in kept) else None


def _strings_whole(tokens):
    """The tokens with each f-string one STRING token (Python 3.12 tokenizes inside f-strings)."""
    start, end = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    if start is None:
        return tokens
    out, opened = [], []
    for tok in tokens:
        if tok.type == start:
            opened.append(tok)
        elif tok.type == end and opened:
            first = opened.pop()
            if not opened:
                text = tok.line[first.start[1] : tok.end[1]]
                out.append(tokenize.TokenInfo(tokenize.STRING, text, first.start, tok.end, tok.line))
        elif not opened:
            out.append(tok)
    return out


def _code(code, indent, width):
    """Lines for one line of code (no comment) at an indentation."""
    if len(indent) + len(code) <= width:
        return [indent + code]
    tokens = _tokens(code)
    if not tokens:
        return [indent + code]
    depth = _depths(tokens)
    if tokens[-1].string == "," and depth[-1] == 0:  # an element of a display or a call: its comma stays last
        lines = _code(code[: tokens[-1].start[1]].rstrip(), indent, width - 1)
        return lines[:-1] + [lines[-1] + ","]
    head = _head(tokens, depth)
    rest = code[head:].strip()
    operators = _top(rest, (",",)) if head else []
    if not operators:
        operators = next((found for ops in SPLITTING if (found := _top(rest, ops, binary=True))), [])
    if operators and not _bracketed(rest):
        opened = f"{code[:head].rstrip()} (" if head else "("
        return [indent + opened] + _body(rest, indent + STEP, width) + [f"{indent})"]
    return _split_brackets(code, tokens, depth, indent, width)


def _split_brackets(code, tokens, depth, indent, width):
    """The line opened inside a top-level bracket: the last whose head and tail fit, else the longest."""
    splits = []  # (where the inside of a top-level bracket starts, where it ends)
    for close in (k for k, tok in enumerate(tokens) if tok.string in CLOSE and depth[k] == 0):
        first, last = tokens[_opening(tokens, depth, close)].end[1], tokens[close].start[1]
        if code[first:last].strip():
            splits.append((first, last))
    if not splits:
        return [indent + code]
    fitting = [(a, b) for a, b in splits if len(indent) + max(a, len(code) - b) <= width]
    chosen = fitting[-1:] or [(a, b) for a, b in splits if b - a >= SHORT] or splits
    lines, end = [], 0
    for first, last in chosen:  # `head(`, its inside, `)middle(`, ..., `)tail`
        lines.append(indent + code[end:first].strip())
        lines += _body(code[first:last].strip(), indent + STEP, width)
        end = last
    return lines + [indent + code[end:].strip()]


def _body(code, indent, width):
    """The inside of brackets: one line per element at its commas, or the operands of its top-level
    + and - (else * and @) each on a line from the operator on; each laid out again."""
    parts = _top(code, (",",))
    if parts:
        pieces, start = [], 0
        for at in parts:
            pieces.append(code[start : at + 1].strip())
            start = at + 1
        if code[start:].strip():
            pieces.append(code[start:].strip())
        if all(len(indent) + len(piece) <= width for piece in pieces):
            return _filled(pieces, indent, width)
        return [line for piece in pieces for line in _code(piece, indent, width)]
    for operators in SPLITTING:
        at = _top(code, operators, binary=True)
        if at:
            cuts = [0, *at, len(code)]
            lines = _code(code[: at[0]].strip(), indent, width)
            for start, stop in zip(cuts[1:], cuts[2:], strict=False):
                operator, operand = _operator(code[start:stop].strip())
                laid = _code(operand, indent, width - len(operator) - 1)
                lines += [f"{indent}{operator} {laid[0].lstrip()}"] + laid[1:]
            return lines
    return _code(code, indent, width)


def _operator(piece):
    """(the binary operator a piece of a broken expression starts with, the operand after it)."""
    tokens = _tokens(piece)
    return tokens[0].string, piece[tokens[0].end[1] :].strip()


def _filled(pieces, indent, width):
    """Short elements packed into as few lines as fit, in order."""
    lines = [indent + pieces[0]]
    for piece in pieces[1:]:
        if len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(indent + piece)
    return lines


def _top(code, operators, binary=False):
    """The columns of the operators (among `operators`) at the top level of code: commas, or binary + and -
    (not a sign: an operator after an operand)."""
    tokens = _tokens(code)
    if not tokens:
        return []
    depth = _depths(tokens)
    found = []
    for k, tok in enumerate(tokens):
        if tok.type == tokenize.OP and tok.string in operators and depth[k] == 0:
            if binary and (k == 0 or not _operand_end(tokens[k - 1])):
                continue
            found.append(tok.start[1])
    return found


def _operand_end(tok):
    """Whether a token can end an operand (so that a + or - after it is binary)."""
    if tok.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING):
        return tok.string not in ("and", "or", "not", "in", "is", "if", "else", "lambda", "return")
    return tok.string in CLOSE


def _depths(tokens):
    """The bracket depth each token sits at (an opening bracket at its outer depth)."""
    depth, out = 0, []
    for tok in tokens:
        if tok.string in CLOSE:
            depth -= 1
        out.append(depth)
        if tok.string in OPEN:
            depth += 1
    return out


def _head(tokens, depth):
    """The column after what a statement's value follows, 0 if none: its first top-level assignment (a
    keyword argument's `=` too), `return`, or a dict entry's `:`."""
    if tokens[0].string == "return" and len(tokens) > 1:
        return tokens[0].end[1]
    for k, tok in enumerate(tokens):
        if tok.type == tokenize.OP and (tok.string in ASSIGN or tok.string == ":") and depth[k] == 0:
            return tok.end[1] if k + 1 < len(tokens) else 0
    return 0


def _bracketed(code):
    """Whether code is one bracketed expression (so that its own brackets are where it breaks)."""
    tokens = _tokens(code)
    if not tokens or tokens[0].string not in OPEN:
        return False
    depth = _depths(tokens)
    return all(d > 0 for d in depth[1:-1]) and tokens[-1].string in CLOSE and depth[-1] == 0


def _opening(tokens, depth, close):
    return max(k for k in range(close) if depth[k] == depth[close] and tokens[k].string in OPEN)


def _tree(source):
    """The syntax tree's dump, each docstring's whitespace collapsed."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            node.value.value = " ".join(node.value.value.split())
    return ast.dump(tree)
