"""The layout's check by parts (codegen/printing/code_check.py kept_code) is as strong as parsing both modules whole
(same_code): it agrees with same_code on every generated module's layout and on layouts planted to change code
where a check of the laid-out lines alone would not see it (the context of a line: its block, a header on its line,
a backslash above it, a string it is in)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bptt.codegen.backends import BACKENDS
from bptt.codegen.printing.code_check import kept_code, same_code
from bptt.codegen.printing.columns import applied, laid_out
from bptt.derive.models import load


def whole(source, changes):
    """same_code of the layout, a module that no longer parses counted as changed code."""
    try:
        return same_code(source, applied(source, changes))
    except SyntaxError:
        return False


def agree(source, changes):
    assert kept_code(source, changes) == whole(source, changes), changes
    return kept_code(source, changes)


SOURCE = '''"""A module."""

import numpy as np


def f(a, b, c=1.0):
    """Add  them."""
    # a comment between statements
    total = a + b * c  # the sum
    for t in range(3): total = total + t
    if total > 0:
        total = total - 1
    text = """
# inside a string
"""
    y = 1 + \\
        2
    label = "the total"  # a string in code
    return total
'''
LINES = SOURCE.splitlines()


def line(text):
    """The number of the source's line that holds text."""
    return next(k for k, line in enumerate(LINES, 1) if text in line)


@pytest.mark.parametrize(
    ("at", "pieces", "same"),
    [
        ("total = a + b", ("    # the sum", "    total = (", "        a", "        + b * c", "    )"), True),
        ("total = a + b", ("    # the sum", "    total = (", "        a", "        - b * c", "    )"), False),
        ("total = a + b", ("    # the sum", "    total = a+b*c"), True),  # the same tokens, spaced otherwise
        ("total = a + b", ("    # the sum", "    total = ab*c"), False),
        ("label =", ("    # a string in code", '    label = "the  total"'), False),  # a string's spaces are its own
        ("label =", ("    # a string in code", "    label = (", '        "the total"', "    )"), True),
        ("total = a + b", ("    # the", "    sum", "    total = a + b * c"), False),  # a comment's word made code
        ("total = a + b", ("# the sum", "total = a + b * c"), False),  # out of its function
        ("total = a + b", ("    total = a + b * c \\",), False),  # joined to the next line
        ("total = a + b", ("    total = a + b * c", "    total = 0"), False),  # a statement more
        ("total = total - 1", ("    total = total - 1",), False),  # out of its `if`
        ("total = total - 1", ("        total = (", "            total - 1", "        )"), True),
        ("for t in", ("    total = total + t",), False),  # its header dropped
        ("for t in", ("    for t in range(3): total = (", "        total + t", "    )"), True),
        ("def f(", ("def f(", "    a, b, c=1.0", "):"), True),
        ("def f(", ("def f(", "    a, b, c=2.0", "):"), False),
        ("def f(", ("def f(", "    a, b, c=1.0", ")"), False),
        ('"""Add', ('    """Add', "    them.", '    """'), True),
        ('"""Add', ('    """Add', "    all of them.", '    """'), False),
        ("# a comment", ("    # a", "    # comment between statements"), True),
        ("# a comment", ("    # a", "    comment = between"), False),
        ("# inside", ("# inside", "# a string"), False),  # a string's text, not a comment
        ("y = 1 +", ("    y = 1 + \\", "    # one and", "        2"), False),  # a comment after a backslash
    ],
)
def test_a_planted_layout_is_judged_as_parsing_the_whole_module_judges_it(at, pieces, same):
    assert agree(SOURCE, {line(at): pieces}) is same


def test_a_statement_continuing_the_line_above_is_checked_whole():
    """After a backslash a comment line ends the header above: the statement alone would parse."""
    source = "if a: \\\nx = 1\n"
    assert agree(source, {2: ("# one", "x = 1")}) is False


def test_a_line_break_other_than_a_newline_is_checked_whole():
    """A form feed in a string splits the source's lines (str.splitlines) but not Python's: laid out, it became a
    newline inside the string."""
    source = 'x = "a\x0cb"\ny = 1 + 2\n'
    assert agree(source, {3: ("y = (", "    1 + 2", ")")}) is False


def test_a_form_feed_in_a_string_is_no_comment_line():
    source = 'x = 1\ns = "a\x0c# b"\n'
    assert agree(source, {3: ('# b"', "# more")}) is False


def test_a_header_ending_in_a_backslash_takes_its_block_onto_its_line():
    source = "def f(a):\n    x = 1\n    return x\n"
    assert agree(source, {1: ("def f(", "    a", "): \\")}) is False


def test_a_statement_ending_in_a_backslash_goes_on_to_the_next_line():
    source = "x = 1 \\\n; y = 2\n"
    assert agree(source, {1: ("x = (", "    1", ")")}) is False


def test_a_changed_line_of_a_compound_statements_else_is_checked_whole():
    """An `else:` line belongs to no statement alone: the module is compared whole."""
    source = "if a:\n    x = 1\nelse: y = 2\n"
    assert agree(source, {3: ("else:", "    y = (", "        2", "    )")}) is True
    assert agree(source, {3: ("y = 2",)}) is False


MODULES = {(name, backend): None for name in ("lstm-peephole", "gru") for backend in sorted(BACKENDS)}


def rendered(name, backend):
    if MODULES[(name, backend)] is None:
        MODULES[(name, backend)] = BACKENDS[backend].rendered(load(name))
    return MODULES[(name, backend)]


@pytest.mark.parametrize(("name", "backend"), sorted(MODULES))
def test_every_layout_of_a_generated_module_keeps_its_code_by_parts(name, backend):
    source = rendered(name, backend)
    changes = laid_out(source)
    assert changes and kept_code(source, changes) and whole(source, changes)


MUTATIONS = (
    lambda text: text.replace(" + ", " - ", 1),
    lambda text: text.replace("(", "", 1),
    lambda text: text.replace("=", "==", 1),
    lambda text: text.lstrip(),
    lambda text: "    " + text,
    lambda text: text + " \\",
    lambda text: text.replace("#", "", 1),
    lambda text: text.replace(", ", ",\n", 1),
    lambda text: text.replace(".", ". ", 1),
)


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(module=st.sampled_from(sorted(MODULES)), data=st.data())
def test_a_mutated_layout_of_a_generated_module_is_judged_as_parsing_it_whole_judges_it(module, data):
    """One laid-out line of a generated module's layout mutated (an operator, a bracket, its indentation, a
    comment made code, a line joined or split): the check by parts says what the whole comparison says."""
    source = rendered(*module)
    changes = laid_out(source)
    number = data.draw(st.sampled_from(sorted(changes)), label="line")
    pieces = changes[number]
    at = data.draw(st.integers(0, len(pieces) - 1), label="piece")
    mutate = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    mutated = "\n".join((*pieces[:at], mutate(pieces[at]), *pieces[at + 1 :])).split("\n")
    agree(source, {**changes, number: tuple(mutated)})
