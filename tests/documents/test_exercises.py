"""`bptt exercises`: every answer of a sheet equals sympy.diff of the unrolled loss (tests/support/exercise_oracle.py,
which shares no code with the generator); seeds give distinct instances; bad input is one line and nothing written."""

import random
import re
import subprocess
import textwrap

import pytest
import sympy as sp

from bptt.app.notebook import exercises
from bptt.derive.models import ZOO, load
from bptt.documents.exercises.curve import KEPT, LARGE, SMALL, SPAN, curve_question
from bptt.documents.exercises.instance import _activations_per_step, draw
from bptt.documents.exercises.numbers import matrix, number
from bptt.documents.exercises.render import sheets
from bptt.documents.exercises.solve import exercise
from bptt.tests.support.cli import REPO, USER_MODELS, assert_ok, assert_user_error, bptt
from bptt.tests.support.exercise_oracle import Unrolled
from bptt.tests.support.markdown_read import display_maths, errors, inline_maths
from bptt.tests.support.zoo import supporting

GELU_CELL = textwrap.dedent(
    """
    from bptt.derive.model import Model, matrix, sequence, sizes
    from bptt.derive.nodes import GenericLoss, SquaredError, gelu, t, tanh


    def gelu_rnn(activation=gelu, loss=SquaredError):
        d, h = sizes("d h")
        W, U = matrix("W", h, h), matrix("U", h, d)
        x, hidden, y = sequence("x", d, "input"), sequence("h", h, "state"), sequence("y", h, "target")
        s = sequence("s", h, "output")
        return Model(
            name="gelu-rnn", title="A GELU cell", source="a test", sizes=(d, h), params=(W, U), inputs=(x,),
            steps=((hidden, activation(W * hidden(t - 1) + U * x())),), outputs=((s, hidden()),),
            loss=loss(s(), y()),
        )


    def unspecified_loss():
        return gelu_rnn(tanh, GenericLoss)
    """
)


@pytest.mark.parametrize("name", ["elman", "linear", "lstm", "examples/gated_rnn.py:gated_rnn"])
def test_every_answer_is_sympy_diff_of_the_unrolled_loss(name):
    """Every state adjoint, the named adjoints, both parameter gradients, and the same under chunks."""
    found, worked = exercise(load(name if name in ZOO else f"{REPO}/{name}"), 1)
    full = [one.lhs.of for one in worked.backward + worked.gate_steps] + list(worked.asked)
    unrolled = Unrolled(found, full)
    for one in worked.backward + worked.gate_steps + worked.gradients:
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


@pytest.mark.parametrize("name", supporting("exercises"))
def test_fifty_distinct_instances_per_model(name):
    """The seeds' numbers (drawn before the forward pass, which only adds the given activations) differ."""
    model = load(name)
    gated = _activations_per_step(model) > 2
    seen = {draw(model, s, random.Random(f"{model.name}:{s}"), gated).numbers() for s in range(55)}
    assert len(seen) >= 50


@pytest.mark.parametrize(
    "args",
    [["nope"], ["elman", "--count", "0"], ["elman", "--count", "100000000000"], ["elman", "--format", "pdf"]],
)
def test_bad_input_is_one_line_and_exit_2(args, tmp_path):
    assert_user_error(bptt("exercises", *args, "-o", tmp_path / "out", cwd=tmp_path))
    assert not (tmp_path / "out").exists()


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "out").write_text("mine")
    assert_user_error(bptt("exercises", "elman", "-o", "out", cwd=tmp_path), "not a folder")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "elman-0-problems.tex").mkdir()
    assert_user_error(bptt("exercises", "elman", "-o", "dir", cwd=tmp_path), "elman-0-problems.tex")
    assert list((tmp_path / "dir").iterdir()) == [tmp_path / "dir" / "elman-0-problems.tex"]


@pytest.mark.parametrize("cell, named", [("gelu_rnn", "gelu"), ("unspecified_loss", "GenericLoss")])
def test_a_cell_with_no_exact_answers_is_refused(cell, named, tmp_path):
    """An activation whose values cannot be given as halves or quarters; a loss left as l(o, y)."""
    (tmp_path / "cell.py").write_text(GELU_CELL)
    assert_user_error(bptt("exercises", f"cell.py:{cell}", "-o", "out", cwd=tmp_path), named)
    assert not (tmp_path / "out").exists()


def test_a_users_cell(tmp_path):
    """A cell of a user's file, named as `bptt latex` takes it (a gated one's answers are checked above)."""
    (tmp_path / "cells.py").write_text(USER_MODELS)
    assert_ok(bptt("exercises", "cells.py:sigmoid_rnn", "-o", "out", "--format", "md", cwd=tmp_path))
    solutions = (tmp_path / "out" / "sigmoid-rnn-0-solutions.md").read_text()
    assert "Elman RNN with a sigmoid activation" in solutions and "\\sigma" in solutions


@pytest.mark.parametrize("name", ["linear", "lstm"])
def test_sheets_compile_with_no_overfull_line(name, tmp_path):
    for kind, text in sheets(load(name), 1).items():
        tex = tmp_path / f"{kind}.tex"
        tex.write_text(text, encoding="utf-8")
        compiled = subprocess.run(
            ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert compiled.returncode == 0, compiled.stdout[-2000:]
        assert "Overfull \\hbox" not in tex.with_suffix(".log").read_text(errors="replace")


def test_markdown_maths_renders_with_katex(markdown_reader):
    """Every $$ block and inline $...$ of the sheets renders with KaTeX, in one Node.js process: a softmax model
    with labels, a teacher-forced one, a gated one (the answers' shapes repeat over seeds and models)."""
    texts = [text for name in ("elman-onehot", "jordan", "lstm") for text in sheets(load(name), 1, "md").values()]
    formulas = sorted({f for text in texts for f in display_maths(text) + inline_maths(text)})
    refused = errors(formulas, markdown_reader(formulas, [])[0])
    assert not refused, f"{len(refused)} formulas KaTeX refuses: {refused[:3]}"


def test_writes_both_sheets(tmp_path):
    assert_ok(bptt("exercises", "elman", "--seed", "3", "--count", "2", "-o", "ex", cwd=tmp_path))
    names = sorted(path.name for path in (tmp_path / "ex").iterdir())
    assert names == [f"elman-{s}-{k}.tex" for s in (3, 4) for k in ("problems", "solutions")]


def test_the_notebook_folds_the_solutions():
    shown = exercises("elman", seed=3)._repr_markdown_()
    problems, _, solutions = shown.partition("<details><summary>")
    assert problems.startswith("# Backpropagation through time: exercises") and "## Questions" in problems
    assert "## 3. The state adjoints" in solutions and "## 3. The state adjoints" not in problems
    assert solutions.rstrip().endswith("</details>")
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        exercises("elman", seed=-1)
    with pytest.raises(TypeError, match="model must be a zoo name"):
        exercises(42)


@pytest.mark.parametrize("name", ["linear", "elman", "lstm", "jordan"])
def test_the_curve_to_predict(name):
    """The answer's numbers are the norms of the products it speaks of, computed here: a symmetric W of the run's
    spectral radius to the power 10 (exact for the linear cell, the bound for tanh), the carousel's gate to the
    power 10; under teacher forcing nothing flows."""
    found, worked = exercise(load(name), 1)
    shown = curve_question(found, worked.flow)
    rng = random.Random(f"{found.model.name}:{found.seed}:curve")
    small, large, kept = rng.choice(SMALL), rng.choice(LARGE), rng.choice(KEPT)
    if name == "jordan":
        assert shown.vanishes == "" and "Neither" in shown.answer
        return
    assert shown.vanishes == "A"
    if name == "lstm":
        assert f"${number(small**SPAN)}$ in run A and ${number(kept**SPAN)}$ in run B" in shown.answer
        return
    for radius, run in ((small, "A"), (large, "B")):
        W = sp.Matrix([[radius, 0], [0, radius / 3]])  # symmetric, spectral radius `radius`
        assert number((W**SPAN).norm(2)) in shown.answer, run
    assert ("explodes" in shown.answer) == (name == "linear")


def test_the_readme_excerpt_is_the_tools_output():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.findall(
        r"<!-- begin exercises excerpt: bptt exercises (\S+) --seed (\d+) --format md -->\n(.*?)<!--", readme, re.S
    )
    assert found
    for name, seed, text in found:
        assert text.strip() and text in sheets(load(name), int(seed), "md")["solutions"]
