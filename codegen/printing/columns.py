"""Lay a rendered module out in WIDTH columns, as a person (or a formatter) would break its long lines.

The printers write one statement per line, with its equation as a trailing comment; the lines a model
makes long are laid out here, by Python's own tokenizer, never by editing code:
- a trailing comment that does not fit goes on its own lines above the statement, wrapped at words;
- a long comment line, or a long line of a docstring, is wrapped at words;
- long code is broken inside its brackets (printing/breaking.py): the right-hand side of an assignment (or a
  return) is put in parentheses and broken before its top-level comparison, else its + and -, or at its
  commas; a call or a display is opened after its last top-level bracket, one argument (or element) per line,
  each laid out again.
Nothing else changes: the syntax tree is the same, docstrings up to their whitespace (printing/code_check.py,
which the tests check on every generated module).
"""

import functools
import textwrap
import tokenize

from bptt.codegen.printing.breaking import OPEN, Code, line_tokens

WIDTH = 120


def columns(source, width=WIDTH):
    """The source with every line laid out in `width` columns where it can be (a long string stays whole)."""
    return applied(source, laid_out(source, width))


def laid_out(source, width=WIDTH):
    """{line number: the lines it is laid out as} for every line of the source longer than `width` (empty if none
    is)."""
    lines = source.splitlines()
    if all(len(line) <= width for line in lines):
        return {}
    docstrings = _docstring_lines(lines)
    changes = {}
    for number, line in enumerate(lines, start=1):
        if len(line) <= width:
            continue
        if number in docstrings:
            changes[number] = _prose(line, width)
        elif _continues(lines, number) and (packed := _elements(line, width)):
            changes[number] = tuple(packed)
        else:
            changes[number] = _statement(line, width)
    return changes


def applied(source, changes):
    """The source with each line `changes` names replaced by its lines (laid_out's); the source itself if none."""
    if not changes:
        return source
    out = []
    for number, line in enumerate(source.splitlines(), start=1):
        out += changes.get(number, (line,))
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def _continues(lines, number):
    """Whether line `number` goes on with a statement begun above it, inside its brackets (a long signature
    the template breaks itself): the line above ends in an open bracket or a comma (its comment aside)."""
    above = next((lines[k].strip() for k in range(number - 2, -1, -1) if lines[k].strip()), "")
    return _ends_open(above)


@functools.lru_cache(maxsize=4096)  # a line above a long line is often one of the template's
def _ends_open(above):
    """Whether a line of code ends in an open bracket or a comma (its comment aside)."""
    tokens = line_tokens(above)
    last = [tok.string for tok in tokens if tok.type != tokenize.COMMENT][-1:] if tokens else [above[-1:]]
    return bool(last) and (last[0] in OPEN or last[0] == ",")


def _elements(line, width):
    """A line of elements inside brackets begun above (`self, d, h, dtype=torch.float64, device=None,`) packed
    into lines of `width` at its indentation, broken after commas; None if it is one element (or a comment
    follows it): then it is laid out as a statement."""
    indent = line[: len(line) - len(line.lstrip())]
    tokens = line_tokens(line.strip())
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
    tokens = line_tokens(line.strip())
    if tokens is None:
        return [line]
    comment = next((tok for tok in tokens if tok.type == tokenize.COMMENT), None)
    above = list(_comment(comment.string, indent, width)) if comment else []
    code = Code(line.strip(), [tok for tok in tokens if tok.type != tokenize.COMMENT])
    if not code.tokens:
        return above
    return above + code.lines((0, len(code.tokens)), indent, width)


@functools.lru_cache(maxsize=4096)  # every backend's module says the same equations
def _comment(text, indent, width):
    body = text.lstrip("#").strip()
    wrapped = textwrap.wrap(body, max(width - len(indent) - 2, 20), break_long_words=False, break_on_hyphens=False)
    return tuple(f"{indent}# {piece}" for piece in wrapped)
