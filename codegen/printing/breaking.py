"""One long line of code broken inside its brackets, by Python's own tokenizer (printing/columns.py lays a
module's lines out with it): the right-hand side of an assignment (or a return) put in parentheses and broken
before its top-level comparison, else its + and -, or at its commas; a call or a display opened after its last
top-level bracket, one argument (or element) per line, each laid out again."""

import bisect
import collections
import functools
import io
import re
import tokenize

STEP = "    "
ASSIGN = {"=", "+=", "-=", "*=", "/=", "@=", "**=", "//=", "%=", "|=", "&=", "^="}
# the binary operators a long expression is broken before, loosest first: an operand of a comparison is a sum,
# but an operand of a sum is no comparison (`a + b * c > 0` broken at + would bracket `(b * c > 0)`)
SPLITTING = (("<", ">", "<=", ">=", "==", "!="), ("+", "-"), ("*", "@", "/"))
LOOSER = {"if", "else", "and", "or", "not", "in", "is", "lambda"}  # a part holding one is broken at its brackets only
OPEN, CLOSE = ("(", "[", "{"), (")", "]", "}")
SHORT = 12  # the inside of a bracket shorter than this stays on its line when no single break fits


@functools.lru_cache(maxsize=256)  # a long line is often read again as the line above the next one
def line_tokens(code):
    """The tokens of one line of code (a tuple), or None if it is not a whole line (an open bracket, a string going
    on)."""
    plain = _plain_tokens(code) if _PLAIN else _SLOW
    if plain is not _SLOW:
        return plain if plain is None else tuple(plain)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    skip = (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT)
    kept = _strings_whole([tok for tok in tokens if tok.type not in skip])
    return tuple(kept) if all(tok.start[0] == 1 for tok in kept) else None


# Python 3.11's tokenize is Python: it reads a line by one pattern, PseudoToken, in the loop _plain_tokens runs
# without tokenize's bookkeeping for lines to come (its tokens are the same: tests/codegen/test_columns.py).
_PLAIN = hasattr(tokenize, "PseudoToken") and not hasattr(tokenize, "FSTRING_START")
_PSEUDO = getattr(tokenize, "PseudoToken", "")
# PseudoToken with most of a printed line found first, where PseudoToken finds the same token, without trying its
# many alternatives: a name that is no string's prefix, an integer without a point, exponent or underscore, a point
# that begins no number, an operator (the longest, as PseudoToken's operators in reverse order find it).
_OPERATORS = sorted((op for op in getattr(tokenize, "EXACT_TOKEN_TYPES", ()) if op[0] != "."), key=len, reverse=True)
_TOKENS = re.compile(
    r" *(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*(?![\w'\"]))|(?P<number>(?:0|[1-9][0-9]*)(?![\w.]))"
    r"|(?P<op>\.(?![0-9.])|" + "|".join(map(re.escape, _OPERATORS)) + ")"
    r"|(?P<other>" + _PSEUDO.removeprefix(getattr(tokenize, "Whitespace", "")) + "))"
)
_KINDS = {"name": tokenize.NAME, "number": tokenize.NUMBER, "op": tokenize.OP}
_SLOW = object()  # what _plain_tokens returns for a line it leaves to tokenize
_TOKEN, _TokenInfo = tuple.__new__, tokenize.TokenInfo  # a TokenInfo made without its Python __new__


def _plain_tokens(code):
    """line_tokens(code) as tokenize finds them (3.11) for a line that starts with code and holds no line break,
    backslash, tab, form feed or triple quote; None if it leaves a bracket open (or closes one never opened);
    _SLOW for any other line, or a character tokenize reads as an error."""
    if not code or code[0] in " #" or any(c in code for c in "\\\n\r\t\f"):
        return _SLOW
    tokens, depth, pos, end = [], 0, 0, len(code)
    for match in _TOKENS.finditer(code):
        if match.start() != pos:
            return _SLOW  # a character no token begins with
        group = match.lastgroup
        start, pos = match.span(group)
        if start == pos:
            continue
        token, initial = code[start:pos], code[start]
        kind = _KINDS[group] if group in _KINDS else _other_kind(token, initial)
        if kind is None:
            return _SLOW
        if kind == tokenize.OP:
            depth += (initial in "([{") - (initial in ")]}")
        tokens.append(_TOKEN(_TokenInfo, (kind, token, (1, start), (1, pos), code)))
    if pos != end:
        return _SLOW
    return tokens if depth == 0 else None


def _other_kind(token, initial):
    """The kind of a token PseudoToken's own alternatives found; None for a triple quote (left to tokenize)."""
    if initial in "0123456789" or (initial == "." and token not in (".", "...")):
        return tokenize.NUMBER
    if initial == "#":
        return tokenize.COMMENT
    if token in tokenize.triple_quoted:
        return None
    if token[-1] in "'\"":  # (a whole string on one line: no other token ends in a quote)
        return tokenize.STRING
    return tokenize.NAME if initial.isidentifier() else tokenize.OP


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
        self.at_depth = collections.defaultdict(list)  # depth: the indices of its tokens, in order
        self.tops = {}  # part: _top_indices(part), asked again by head, top (for each operator) and body
        for k, tok in enumerate(tokens):
            depth -= tok.string in CLOSE
            self.depth.append(depth)
            self.at_depth[depth].append(k)
            depth += tok.string in OPEN

    def _top_indices(self, part):
        """The indices of a part's tokens at its lowest depth, in order (a tuple, remembered)."""
        if part not in self.tops:
            first, stop = part
            indices = self.at_depth[min(self.depth[first:stop])]
            self.tops[part] = tuple(indices[bisect.bisect_left(indices, first) : bisect.bisect_left(indices, stop)])
        return self.tops[part]

    def source(self, part):
        first, stop = part
        return self.text[self.tokens[first].start[1] : self.tokens[stop - 1].end[1]] if stop > first else ""

    def top(self, part, operators, binary=False):
        """The indices of the operators at the top level of a part: commas, or binary + and - (not a sign:
        an operator after an operand)."""
        first = part[0]
        indices = self._top_indices(part)
        found = []
        if binary and any(self.tokens[k].string in LOOSER for k in indices):
            return found
        for k in indices:
            tok = self.tokens[k]
            if tok.type == tokenize.OP and tok.string in operators:
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
        for k in self._top_indices(part):
            tok = self.tokens[k]
            if k < stop - 1 and tok.type == tokenize.OP and (tok.string in ASSIGN or tok.string == ":"):
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
