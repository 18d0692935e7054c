"""Lay a rendered module out in WIDTH columns, as a person (or a formatter) would break its long lines.

The printers write one statement per line, with its equation as a trailing comment; the lines a model
makes long are laid out here, by Python's own tokenizer, never by editing code:
- a trailing comment that does not fit goes on its own lines above the statement, wrapped at words;
- a long comment line, or a long line of a docstring, is wrapped at words;
- long code is broken inside its brackets: the right-hand side of an assignment (or a return) is put in
  parentheses and broken before its top-level comparison, else its + and -, or at its commas; a call or a
  display is opened after its last top-level bracket, one argument (or element) per line, each laid out again.
Nothing else changes: the syntax tree is the same, docstrings up to their whitespace (`same_code`,
which the tests check on every generated module).
"""

import ast
import functools
import io
import textwrap
import tokenize

WIDTH = 120
STEP = "    "
ASSIGN = {"=", "+=", "-=", "*=", "/=", "@=", "**=", "//=", "%=", "|=", "&=", "^="}
# the binary operators a long expression is broken before, loosest first: an operand of a comparison is a sum,
# but an operand of a sum is no comparison (`a + b * c > 0` broken at + would bracket `(b * c > 0)`)
SPLITTING = (("<", ">", "<=", ">=", "==", "!="), ("+", "-"), ("*", "@", "/"))
LOOSER = {"if", "else", "and", "or", "not", "in", "is", "lambda"}  # a part holding one is broken at its brackets only
OPEN, CLOSE = ("(", "[", "{"), (")", "]", "}")
SHORT = 12  # the inside of a bracket shorter than this stays on its line when no single break fits


def columns(source, width=WIDTH):
    """The source with every line laid out in `width` columns where it can be (a long string stays whole)."""
    lines = source.splitlines()
    if all(len(line) <= width for line in lines):
        return source
    docstrings = _docstring_lines(lines)
    out = []
    for number, line in enumerate(lines, start=1):
        if len(line) <= width:
            out.append(line)
        elif number in docstrings:
            out += _prose(line, width)
        elif _continues(lines, number) and (packed := _elements(line, width)):
            out += packed
        else:
            out += _statement(line, width)
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def same_code(source, laid):
    """Whether two sources have the same syntax tree, each docstring's whitespace collapsed (tests check
    that `columns` changes nothing else)."""
    return laid == source or _same_tree(ast.parse(source), ast.parse(laid))


def _continues(lines, number):
    """Whether line `number` goes on with a statement begun above it, inside its brackets (a long signature
    the template breaks itself): the line above ends in an open bracket or a comma (its comment aside)."""
    above = next((line.strip() for line in reversed(lines[: number - 1]) if line.strip()), "")
    tokens = _tokens(above)
    last = [tok.string for tok in tokens if tok.type != tokenize.COMMENT][-1:] if tokens else [above[-1:]]
    return bool(last) and (last[0] in OPEN or last[0] == ",")


def _elements(line, width):
    """A line of elements inside brackets begun above (`self, d, h, dtype=torch.float64, device=None,`) packed
    into lines of `width` at its indentation, broken after commas; None if it is one element (or a comment
    follows it): then it is laid out as a statement."""
    indent = line[: len(line) - len(line.lstrip())]
    tokens = _tokens(line.strip())
    if tokens is None or any(tok.type == tokenize.COMMENT for tok in tokens):
        return None
    code = Code(line.strip(), tokens)
    commas = [k for k in code.top((0, len(tokens)), (",",))]
    if not commas or commas == [len(tokens) - 1]:
        return None
    starts = [0] + [k + 1 for k in commas if k + 1 < len(tokens)]
    parts = [code.source((a, b)) for a, b in zip(starts, starts[1:] + [len(tokens)], strict=True)]
    out = [indent]
    for part in parts:
        if out[-1] != indent and len(out[-1]) + 1 + len(part) > width:
            out[-1] = out[-1].rstrip()
            out.append(indent)
        out[-1] += ("" if out[-1] == indent else " ") + part
    return out


def _docstring_lines(lines):
    """The numbers of the lines inside a triple-quoted string: the generated code's docstrings (its printed
    code quotes strings with one quote)."""
    inside, found = False, set()
    for number, line in enumerate(lines, start=1):
        quotes = line.count('"""')
        if inside or quotes:
            found.add(number)
        inside ^= quotes % 2 == 1
    return found


@functools.lru_cache(maxsize=4096)  # the template's docstrings recur in every module
def _prose(line, width):
    """A long line of a docstring wrapped at words, each piece at the line's indentation."""
    indent = line[: len(line) - len(line.lstrip())]
    wrapped = textwrap.wrap(
        line.strip(),
        width - len(indent),
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return tuple(wrapped) or (line,)


@functools.lru_cache(maxsize=4096)  # a helper's long lines recur in every module that copies it
def _statement(line, width):
    """A long line of code, as a tuple of lines: its comment above it if that makes it fit (or if it is a
    comment alone), the code broken in its brackets."""
    return tuple(_statement_lines(line, width))


def _statement_lines(line, width):
    indent = line[: len(line) - len(line.lstrip())]
    tokens = _tokens(line.strip())
    if tokens is None:
        return [line]
    comment = next((tok for tok in tokens if tok.type == tokenize.COMMENT), None)
    above = _comment(comment.string, indent, width) if comment else []
    code = Code(line.strip(), [tok for tok in tokens if tok.type != tokenize.COMMENT])
    if not code.tokens:
        return above
    return above + code.lines((0, len(code.tokens)), indent, width)


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


class Code:
    """One line of code tokenized once; its parts are ranges (first, stop) of its tokens."""

    def __init__(self, text, tokens):
        self.text, self.tokens = text, tokens
        self.depth, depth = [], 0  # the bracket depth of each token (a bracket at its outer depth)
        for tok in tokens:
            depth -= tok.string in CLOSE
            self.depth.append(depth)
            depth += tok.string in OPEN

    def source(self, part):
        first, stop = part
        return self.text[self.tokens[first].start[1] : self.tokens[stop - 1].end[1]] if stop > first else ""

    def top(self, part, operators, binary=False):
        """The indices of the operators at the top level of a part: commas, or binary + and - (not a sign:
        an operator after an operand)."""
        first, stop = part
        base = min(self.depth[first:stop])
        found = []
        if binary and any(self.tokens[k].string in LOOSER and self.depth[k] == base for k in range(first, stop)):
            return found
        for k in range(first, stop):
            tok = self.tokens[k]
            if tok.type == tokenize.OP and tok.string in operators and self.depth[k] == base:
                if binary and (k == first or not _operand_end(self.tokens[k - 1])):
                    continue
                found.append(k)
        return found

    def lines(self, part, indent, width):
        """Lines for a part of the line (no comment) at an indentation."""
        text = self.source(part)
        if len(indent) + len(text) <= width or part[1] <= part[0]:
            return [indent + text]
        first, stop = part
        if self.tokens[stop - 1].string == "," and self.depth[stop - 1] == min(self.depth[first:stop]):
            lines = self.lines((first, stop - 1), indent, width - 1)  # an element: its comma stays last
            return lines[:-1] + [lines[-1] + ","]
        head = self.head(part)
        rest = (head, stop) if head is not None else part
        operators = self.top(rest, (",",)) if head is not None else []
        if not operators:
            operators = next((found for ops in SPLITTING if (found := self.top(rest, ops, binary=True))), [])
        if operators and not self.bracketed(rest):
            opened = f"{self.source((first, head))} (" if head is not None else "("
            return [indent + opened] + self.body(rest, indent + STEP, width) + [f"{indent})"]
        return self.split_brackets(part, indent, width)

    def head(self, part):
        """The index after what a part's value follows, None if none: its first top-level assignment (a
        keyword argument's `=` too), `return`, or a dict entry's `:`."""
        first, stop = part
        if self.tokens[first].string == "return" and stop > first + 1:
            return first + 1
        base = min(self.depth[first:stop])
        for k in range(first, stop - 1):
            tok = self.tokens[k]
            if tok.type == tokenize.OP and (tok.string in ASSIGN or tok.string == ":") and self.depth[k] == base:
                return k + 1
        return None

    def bracketed(self, part):
        """Whether a part is one bracketed expression (so that its own brackets are where it breaks)."""
        first, stop = part
        if self.tokens[first].string not in OPEN or self.tokens[stop - 1].string not in CLOSE:
            return False
        return all(d > self.depth[first] for d in self.depth[first + 1 : stop - 1])

    def split_brackets(self, part, indent, width):
        """The part opened inside a top-level bracket: the last whose head and tail fit, else each long one."""
        first, stop = part
        base = min(self.depth[first:stop])
        splits = []  # (opening bracket, closing bracket) with something inside
        opened = []
        for k in range(first, stop):
            if self.depth[k] != base:
                continue
            if self.tokens[k].string in OPEN:
                opened.append(k)
            elif self.tokens[k].string in CLOSE and opened:
                start = opened.pop()
                if k > start + 1:
                    splits.append((start, k))
        if not splits:
            return [indent + self.source(part)]
        start_col, stop_col = self.tokens[first].start[1], self.tokens[stop - 1].end[1]

        def fits(split):
            a, b = split
            head, tail = self.tokens[a].end[1] - start_col, stop_col - self.tokens[b].start[1]
            return len(indent) + max(head, tail) <= width

        def long(split):
            return len(self.source((split[0] + 1, split[1]))) >= SHORT

        chosen = [split for split in splits if fits(split)][-1:] or [s for s in splits if long(s)] or splits
        lines, at = [], first
        for a, b in chosen:  # `head(`, its inside, `)middle(`, ..., `)tail`
            lines.append(indent + self.source((at, a + 1)))
            lines += self.body((a + 1, b), indent + STEP, width)
            at = b
        return lines + [indent + self.source((at, stop))]

    def body(self, part, indent, width):
        """The inside of brackets: one line per element at its commas (short ones filled), or the operands of
        its top-level + and - (else * and @) each on a line from the operator on; each laid out again."""
        first, stop = part
        commas = self.top(part, (",",))
        if commas:
            pieces = [(a, b + 1) for a, b in zip([first] + [c + 1 for c in commas[:-1]], commas, strict=True)]
            pieces += [(commas[-1] + 1, stop)] if commas[-1] + 1 < stop else []
            texts = [self.source(piece) for piece in pieces]
            if all(len(indent) + len(text) <= width for text in texts):
                return _filled(texts, indent, width)
            return [line for piece in pieces for line in self.lines(piece, indent, width)]
        for operators in SPLITTING:
            cuts = self.top(part, operators, binary=True)
            if cuts:
                lines = self.lines((first, cuts[0]), indent, width)
                for a, b in zip(cuts, cuts[1:] + [stop], strict=True):
                    operator = self.tokens[a].string
                    laid = self.lines((a + 1, b), indent, width - len(operator) - 1)
                    lines += [f"{indent}{operator} {laid[0].lstrip()}"] + laid[1:]
                return lines
        return self.lines(part, indent, width)


def _filled(pieces, indent, width):
    """Short elements packed into as few lines as fit, in order."""
    lines = [indent + pieces[0]]
    for piece in pieces[1:]:
        if len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(indent + piece)
    return lines


def _operand_end(tok):
    """Whether a token can end an operand (so that a + or - after it is binary)."""
    if tok.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING):
        return tok.string not in ("and", "or", "not", "in", "is", "if", "else", "lambda", "return")
    return tok.string in CLOSE


def _same_tree(tree, other):
    """Whether two syntax trees are equal field by field (positions aside, as ast.dump shows them), a string
    statement's (a docstring's) text up to its whitespace. Compared pair by pair: dumping both trees took
    longer than parsing them."""
    pairs = [(tree, other)]
    while pairs:
        one, two = pairs.pop()
        if type(one) is not type(two):
            return False
        if isinstance(one, ast.Expr) and _is_text(one.value) and _is_text(two.value):
            pairs += [(one.value.kind, two.value.kind), (one.value.value.split(), two.value.value.split())]
        elif isinstance(one, ast.AST):
            pairs += [(getattr(one, field, None), getattr(two, field, None)) for field in one._fields]
        elif isinstance(one, list):
            if len(one) != len(two):
                return False
            pairs += zip(one, two, strict=True)
        elif one != two or (isinstance(one, float | complex) and repr(one) != repr(two)):  # 0.0 == -0.0
            return False
    return True


def _is_text(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
