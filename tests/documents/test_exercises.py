"""`bptt exercises`: every answer of a sheet equals sympy.diff of the unrolled loss (tests/support/exercise_oracle.py,
which shares no code with the generator); seeds give distinct instances; bad input is one line and nothing written."""

import random
import subprocess
import sys

import pytest

from bptt.derive.models import ZOO, load
from bptt.documents.exercises.instance import _activations_per_step, draw
from bptt.documents.exercises.numbers import matrix
from bptt.documents.exercises.render import sheets
from bptt.documents.exercises.solve import exercise
from bptt.tests.support.exercise_oracle import Unrolled


@pytest.mark.parametrize("name", ["elman", "linear", "gru"])
def test_every_answer_is_sympy_diff_of_the_unrolled_loss(name):
    found, worked = exercise(load(name), 1)
    full = [one.lhs.of for one in worked.backward] + list(worked.asked)
    unrolled = Unrolled(found, full)
    for one in worked.backward + worked.gradients:
        key = getattr(one.lhs, "of", one.lhs)
        assert unrolled.gradient(key) == one.value, key
    cut = Unrolled(found, [one.lhs.of for one in worked.truncated] + list(worked.asked[:1]), chunk=found.tau)
    for one in worked.truncated + worked.truncated_gradients:
        key = getattr(one.lhs, "of", one.lhs)
        assert cut.gradient(key) == one.value, ("truncated", key)


def test_the_solution_sheet_shows_the_checked_answers():
    found, worked = exercise(load("elman"), 3)
    text = sheets(load("elman"), 3, "md")["solutions"]
    for one in worked.backward + worked.gradients + worked.truncated_gradients:
        assert f"&= {matrix(one.value)}" in text


@pytest.mark.parametrize("name", sorted(ZOO))
def test_fifty_distinct_instances_per_model(name):
    """The seeds' numbers (drawn before the forward pass, which only adds the given activations) differ."""
    model = load(name)
    gated = _activations_per_step(model) > 2
    seen = {draw(model, s, random.Random(f"{model.name}:{s}"), gated).numbers() for s in range(55)}
    assert len(seen) >= 50


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "bptt", "exercises", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize(
    "args",
    [["nope"], ["elman", "--count", "0"], ["elman", "--count", "100000000000"], ["elman", "--format", "pdf"]],
)
def test_bad_input_is_one_line_and_exit_2(args, tmp_path):
    done = run(*args, "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "out").write_text("mine")
    done = run("elman", "-o", "out", cwd=tmp_path)
    assert done.returncode == 2 and "not a folder" in done.stderr
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "elman-0-problems.tex").mkdir()
    done = run("elman", "-o", "dir", cwd=tmp_path)
    assert done.returncode == 2 and not (tmp_path / "dir" / "elman-0-solutions.tex").exists()


def test_writes_both_sheets_that_compile(tmp_path):
    done = run("elman", "--seed", "3", "-o", "ex", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for kind in ("problems", "solutions"):
        tex = tmp_path / "ex" / f"elman-3-{kind}.tex"
        assert tex.read_text().startswith("\\documentclass")
        compiled = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", tex.name], cwd=tex.parent, capture_output=True, text=True
        )
        assert compiled.returncode == 0
        assert "Overfull \\hbox" not in tex.with_suffix(".log").read_text(errors="replace")
