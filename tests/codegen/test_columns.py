"""Generated code a reader could have written: every module in 120 columns (codegen/printing/columns.py lays
the rendered lines out), its code unchanged by that layout, and the names it makes bounded. The random cells'
modules are checked for width where tests/oracle/test_random_cells.py generates them."""

import ast
import io
import pathlib
import re
import tokenize

import pytest

from bptt.codegen.backends import BACKENDS
from bptt.codegen.passes.fuse import LONGEST, internal
from bptt.codegen.printing import breaking
from bptt.codegen.printing.code_check import same_code
from bptt.codegen.printing.columns import WIDTH, columns
from bptt.derive.models import load

GENERATED = pathlib.Path(__file__).resolve().parents[2] / "generated"


@pytest.mark.parametrize("path", sorted(GENERATED.glob("*.py")), ids=lambda path: path.name)
def test_every_generated_module_fits_in_120_columns(path):
    long = [(k, line) for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if len(line) > WIDTH]
    assert not long, f"{path.name}: {len(long)} lines over {WIDTH} columns, the first: {long[0]}"


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name", ["gru", "lstm-peephole"])
def test_the_layout_changes_no_code(name, backend):
    """The rendered module laid out has the rendered module's syntax tree (docstrings up to whitespace), and
    is what `bptt codegen` writes."""
    model = load(name)
    raw = BACKENDS[backend].rendered(model)
    assert any(len(line) > WIDTH for line in raw.splitlines())  # there is something to lay out
    laid = columns(raw)
    assert same_code(raw, laid)
    assert laid == (GENERATED / BACKENDS[backend].filename(model.name)).read_text(encoding="utf-8")


def laid(code, width=40):
    out = columns(code + "\n", width)
    assert same_code(code + "\n", out), out
    return out.splitlines()


def test_a_trailing_comment_goes_above_its_statement_wrapped_at_words():
    lines = laid("y = a + b  # the sum of a and b, which is long enough to wrap twice", width=30)
    assert lines == ["# the sum of a and b, which is", "# long enough to wrap twice", "y = a + b"]


def test_a_long_sum_breaks_before_its_operators_in_parentheses():
    lines = laid("total = first_term * x + second_term * y - third_term")
    assert lines == ["total = (", "    first_term * x", "    + second_term * y", "    - third_term", ")"]


def test_a_comparison_of_a_long_sum_breaks_before_the_comparison_first():
    """`a + b * c > 0` is `(a + b * c) > 0`: broken at + first it read `a + (b * c > 0)` (torch's compile=True step of
    a random cell's step(...) computed that, 0.2 off the oracle). Nor is a part holding `if` or `and` cut at +."""
    lines = laid("on = (first_term * x + second_term * y - third_term > 0).to(dtype)")  # laid checks the same code
    assert lines[1:7] == [
        "    (",
        "        first_term * x",
        "        + second_term * y",
        "        - third_term",
        "    )",
        "    > 0",
    ]
    laid("value = first_term * x + second_term if flag_value_that_is_long else third_term * y")


def test_a_call_opens_after_its_bracket_its_arguments_filled():
    lines = laid("result = function_name(argument_one, argument_two, out=argument_three)", width=44)
    assert lines == ["result = function_name(", "    argument_one, argument_two,", "    out=argument_three", ")"]


def test_a_sign_stays_a_sign_and_an_elements_comma_stays_last():
    lines = laid("values = [-alpha * beta_value + gamma_value, delta_value_is_long + epsilon]", width=36)
    tree = ast.dump(ast.parse("\n".join(lines)))
    assert tree == ast.dump(ast.parse("values = [-alpha * beta_value + gamma_value, delta_value_is_long + epsilon]"))
    assert all(len(line) <= 36 for line in lines), lines


def test_what_cannot_break_stays_whole_and_a_docstring_wraps():
    source = f'def f():\n    """{"word " * 12}end."""\n    return "{"x" * 50}"\n'
    out = columns(source, 40)
    assert same_code(source, out)
    assert f'    return "{"x" * 50}"' in out.splitlines()  # a string is never cut
    assert all(len(line) <= 40 for line in out.splitlines() if '"xxx' not in line)
    assert columns("x = 1\n", 40) == "x = 1\n"


def test_made_names_are_bounded_and_say_what_they_hold():
    """A group's (or a stack's) code name joins its members' names, or names the first and the last."""
    assert internal(["i", "f", "o", "g"]) == "_i_f_o_g"
    assert internal(["i_bar", "f_bar", "o_bar", "g_bar"]) == "_i_bar_to_g_bar"
    assert internal(["_pre_f", "_pre_i"]) == "_pre_f_pre_i"
    names = {
        name
        for path in GENERATED.glob("*.py")
        for name in re.findall(r"\b_[A-Za-z][A-Za-z0-9_]*\b", path.read_text(encoding="utf-8"))
    }
    made = [name for name in names if name.count("_") > 3]  # joined names, not a helper's
    assert made and max(len(name) for name in made) <= LONGEST + len("_d__halved_T") + 6, sorted(made, key=len)[-3:]


def test_a_long_line_of_a_signature_broken_by_hand_is_packed_not_read_as_an_assignment():
    """A template breaks torch's Model.__init__ itself; with many sizes its middle line is long: its elements
    are packed at its indentation (keyword defaults are not assignments)."""
    signature = "    self, alpha, beta, gamma, delta, dtype=float, device=None, rng=None,"
    code = f"def f(\n{signature}\n    compile=False\n):\n    pass"
    lines = laid(code, width=40)
    assert lines[1:4] == [
        "    self, alpha, beta, gamma, delta,",
        "    dtype=float, device=None, rng=None,",
        "    compile=False",
    ]


def test_a_docstrings_long_hyphenated_path_is_never_broken_at_a_hyphen():
    """A user's module names its file (pytest's folders are pytest-of-root/pytest-444/...): wrapped at a hyphen, the
    docstring read "pytest- of-root", and codegen stopped on its own layout check."""
    path = "/tmp/pytest-of-root/pytest-444/popen-gw1/test_a_users_module_goes_to_the_cu0/user_model.py"
    laid(f'def f():\n    """Generated by `bptt codegen {path}` from the model, and more words after it."""')


def test_same_code_tells_a_changed_tree_from_a_laid_out_one():
    """Brackets, line breaks and a docstring's whitespace are the same code; another grouping, operator,
    constant or docstring word is not (codegen refuses to write a module whose layout changed its code)."""
    statement = "return a + b * c > 0"
    source = f'def f(a, b, c):\n    """Add  them."""\n    {statement}\n'
    laid_out = 'def f(a, b, c):\n    """Add\n    them."""\n    return (\n        a + b * c\n        > 0\n    )\n'
    assert same_code(source, laid_out) and same_code(source, source)
    for changed in (
        "return a + (b * c > 0)",
        "return a + b * c >= 0",
        "return a + b * c > 0.0",
        "return a - b * c > 0",
    ):
        assert not same_code(source, source.replace(statement, changed)), changed
    assert not same_code(source, source.replace("Add  them", "Add them all"))


def tokenized(code):
    """line_tokens as tokenize alone gives them."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except tokenize.TokenError:
        return None
    kept = [tok for tok in tokens if tok.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)]
    return kept if all(tok.start[0] == 1 for tok in kept) else None


TRICKY = [
    "x = a.b(1.5e-3, .5, ...)[::2]  # a comment (with a bracket",
    "y = f'{a}' + rb'\\x' + 'it''s' @ w",
    "z = (1,",
    "z = 1)",
    "s = 'no end",
    "q = a $ b",
    "t = x if a else -y ** 2 != 3",
]


def test_the_plain_line_tokenizer_reads_every_line_as_tokenize_does():
    """breaking._plain_tokens, tokenize's loop for one plain line: the same tokens as tokenize on every line of the
    generated GRU modules, on their halves (brackets left open) and on tricky lines, or it leaves the line to
    tokenize; line_tokens, which remembers them, gives those of tokenize alone."""
    lines = {line.strip() for path in GENERATED.glob("gru*.py") for line in path.open(encoding="utf-8")}
    lines |= {line[: len(line) // 2] for line in lines} | set(TRICKY)
    plain = {line: breaking._plain_tokens(line) for line in lines}
    assert sum(found is not breaking._SLOW for found in plain.values()) > len(lines) / 2
    for line, found in plain.items():
        assert found is breaking._SLOW or found == tokenized(line), line
        expected = tokenized(line)
        for _ in range(2):  # computed, then remembered (a tuple: no caller can change what is remembered)
            assert breaking.line_tokens(line) == (expected if expected is None else tuple(expected)), line
