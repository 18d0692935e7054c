"""The option values (runtime/options.py): Truncation and Checkpoints parse the API's arguments and the CLI's
text, refuse bad ones in the messages the modules print, describe themselves, and are the one place the
truncation modes are spelled."""

import ast
import pathlib

import numpy as np
import pytest

from bptt.runtime.options import CHUNK, FULL, RANDOM, WINDOW, Checkpoints, Truncation

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODES = {"window", "chunk", "random"}
ROOMS = ("runtime", "codegen", "app", "derive", "documents", "generated")


def test_a_truncate_argument_becomes_a_truncation():
    assert Truncation.of(None) == Truncation(FULL) and Truncation.of(None).full
    window = Truncation.of(("window", np.int64(3)))
    assert window == (WINDOW, 3) and type(window.value) is int and window.windowed and window.ages == 4
    assert Truncation.of(("chunk", 2)).chunked and not Truncation.of(("chunk", 2)).windowed
    random = Truncation.of(("random", 1))
    assert random == (RANDOM, 1.0) and type(random.value) is float and random.randomized and random.ages == 1
    assert [Truncation.of(t).weighted for t in (None, ("window", 2), ("chunk", 2), ("random", 0.5))] == [
        False,
        False,
        True,
        True,
    ]
    assert Truncation.of(Truncation.of(None)).full  # a value is an argument too
    assert Truncation.of(("chunk", 5)).argument == ("chunk", 5) and Truncation.of(None).argument is None


@pytest.mark.parametrize(
    "bad, message",
    [
        (("window", 0), "truncate=('window', k): k must be an integer >= 1, got 0"),
        (("chunk", True), "truncate=('chunk', k): k must be an integer >= 1, got True"),
        (("random", 1.5), "truncate=('random', pi): pi must be in (0, 1], got 1.5"),
        (("full", None), "truncate must be None, ('window', k), ('chunk', k) or ('random', pi); got ('full', None)"),
        (["chunk", 2], "truncate must be None, ('window', k), ('chunk', k) or ('random', pi); got ['chunk', 2]"),
    ],
)
def test_a_bad_truncate_argument_is_refused_in_one_line(bad, message):
    with pytest.raises(ValueError) as error:
        Truncation.of(bad)
    assert str(error.value) == message


@pytest.mark.parametrize("text", ["window:3", "chunk:1", "random:0.5", "random:1.0"])
def test_cli_text_round_trips(text):
    truncation = Truncation.parse(text)
    assert truncation.text() == text and Truncation.parse(truncation.text()) == truncation


@pytest.mark.parametrize("text", ["window:0", "chunk:x", "random:0", "random:2", "full:1", "window", ""])
def test_bad_cli_text_is_refused_in_one_line(text):
    with pytest.raises(ValueError) as error:
        Truncation.parse(text)
    expected = f"expected window:K or chunk:K with K >= 1, or random:PI with 0 < PI <= 1; got {text!r}"
    assert str(error.value) == expected


def test_a_truncation_describes_itself():
    assert Truncation.of(None).describe() == "full BPTT"
    assert "at most 3 steps" in Truncation.parse("window:3").describe()
    assert "every 4 steps" in Truncation.parse("chunk:4").describe()
    assert "probability 0.25" in Truncation.parse("random:0.25").describe()


def test_a_checkpoints_argument_becomes_slots_or_a_byte_budget():
    assert Checkpoints.of(np.int64(5)) == Checkpoints(slots=5)
    assert Checkpoints.of("32MiB").bytes == 32 * 2**20 and Checkpoints.of("32MiB").argument == "32MiB"
    assert Checkpoints.parse("7") == Checkpoints(slots=7) and Checkpoints.parse("1kB").bytes == 1000
    for text in ("7", "32MiB", "2 GB"):
        assert Checkpoints.parse(Checkpoints.parse(text).text()) == Checkpoints.parse(text)
    assert Checkpoints.of(5).budget(64, 128) == (5, 1, 1)
    assert Checkpoints.of("1KiB").budget(100, 300) == (1024, 100, 300)
    assert Checkpoints.of(3).describe().startswith("3 slots")
    assert Checkpoints.of("1KiB").describe() == "a budget of 1KiB (1024 bytes)"


@pytest.mark.parametrize("bad", [0, True, 2.5, "32 parsecs", "0MiB", None])
def test_a_bad_checkpoints_argument_is_refused_in_one_line(bad):
    with pytest.raises(ValueError) as error:
        Checkpoints.of(bad)
    expected = f"checkpoints must be a positive integer (slots) or a byte budget such as '32MiB', got {bad!r}"
    assert str(error.value) == expected


def test_a_budget_that_holds_no_step_is_refused():
    with pytest.raises(ValueError) as error:
        Checkpoints.of("1KiB").budget(1024, 4096)
    assert (
        str(error.value)
        == "checkpoints='1KiB' holds no step: one stored step takes 4096 bytes here (a kept state 1024)"
    )


def mode_literals(path):
    """(line, literal) of every string constant naming a truncation mode, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in MODES and id(node) not in docstrings
    ]


def test_the_modes_are_spelled_in_one_module():
    """Outside runtime/options.py every module compares against its constants or asks a Truncation."""
    spelled = {
        f"{path.relative_to(ROOT)}:{line}": literal
        for room in ROOMS
        for path in sorted((ROOT / room).rglob("*.py"))
        if path != ROOT / "runtime" / "options.py"
        for line, literal in mode_literals(path)
    }
    assert spelled == {}
    assert {WINDOW, CHUNK, RANDOM} == MODES and [line for line, _ in mode_literals(ROOT / "runtime/options.py")]
