"""Issue 28: a norm's division by a zero deviation (eps = 0, a vector whose units are equal) is reported by
`bptt check` in one line, exit 4, naming the deviation and the step, not a table of nan and no NumPy warning:
in float32 for a vector that float64 still tells apart (1 + W x_t / 10^8), and in any dtype for a norm over one
unit. A cell that reduces its parameters (mean(g), sum(g)) passes the check in every backend."""

import pathlib
import textwrap

import numpy as np

from bptt.app.verify.check import load_module
from bptt.app.verify.problem import problem
from bptt.derive.models import load
from bptt.tests.support.cli import assert_error, assert_ok, bptt

NORM_CELLS = pathlib.Path(__file__).resolve().parents[1] / "support" / "norm_cells.py"

NEARLY_CONSTANT = textwrap.dedent(
    """
    from bptt.derive.model import Model, matrix, sequence, sizes
    from bptt.derive.nodes import SquaredError, layer_norm, t, tanh


    def cell():
        d, h, q = sizes("d h q")
        W, U, V = matrix("W", h, d), matrix("U", h, h), matrix("V", q, h)
        x, a, hidden = sequence("x", d, "input"), sequence("a", h, "intermediate"), sequence("h", h, "state")
        s, y = sequence("s", q, "output"), sequence("y", q, "target")
        return Model(
            name="flat", title="A norm of a nearly constant vector", source="a test", sizes=(d, h, q),
            params=(W, U, V), inputs=(x,),
            steps=((a, W * x() / 10**8 + 1), (hidden, tanh(layer_norm(a()) + U * hidden(t - 1)))),
            outputs=((s, V * hidden()),), loss=SquaredError(s(), y()),
        )
    """
)


def test_a_norm_of_a_vector_float32_cannot_tell_apart_is_reported_in_one_line(tmp_path):
    path = tmp_path / "flat.py"
    path.write_text(NEARLY_CONSTANT, encoding="utf-8")
    module = load_module(load(f"{path}:cell"), from_zoo=False)
    instance = problem(module, steps=5, batch=3, seed=0)
    outputs, cache = module.forward(instance.params, instance.xs, **instance.initial)
    assert np.isfinite(outputs).all() and (cache["sigma_a"][1:] > 0).all()  # float64 tells the units apart
    result = bptt("check", f"{path}:cell", "--dtype", "float32")
    assert_error(result, 4, "float32", "divides by zero", "sigma_a is 0 at step t=1 of T=5", "eps")
    assert result.stderr.rstrip().endswith(
        "(nothing to differentiate; a positive eps keeps it finite, and so may float64)"
    )
    assert "nan" not in result.stdout and "Warning" not in result.stderr


def test_a_norm_over_one_unit_divides_by_zero_in_float64_too(tmp_path):
    """h = 1: the norm is of one unit, its deviation 0 at every step, in any dtype."""
    path = tmp_path / "flat.py"
    path.write_text(NEARLY_CONSTANT, encoding="utf-8")
    for dtype in ("float64", "float32"):  # float64 does not help: no remedy names it
        result = bptt("check", f"{path}:cell", "--sizes", "d=3,h=1,q=2", "--dtype", dtype)
        assert_error(result, 4, dtype, "divides by zero", "sigma_a is 0 at step t=1", "not finite from step t=1")
        assert result.stderr.rstrip().endswith("(nothing to differentiate; a positive eps keeps it finite)")


def test_a_cell_that_reduces_its_parameters_passes_the_check_in_every_backend():
    """mean(g) and sum(g) of a parameter, added and multiplied (tests/support/norm_cells.py:reduced_params): the NumPy
    module computed them into arrays of every step's samples and ended the check with an internal error (a ValueError
    of np.dot's out=); torch's and JAX's, whose vectors check_backend.Framework shows, with an AttributeError naming
    the module (trusted.py)."""
    result = bptt("check", f"{NORM_CELLS}:reduced_params", "--backend", "all", "--steps", "3", "--batch", "2")
    assert_ok(result)
    assert result.stdout.count("all gradients agree with finite differences") == 3, result.stdout
    assert "Warning" not in result.stderr, result.stderr


def test_a_cell_with_a_value_of_one_unit_is_checked_without_a_warning():
    """A value of a literal one unit (a_t = w x_t, w of 1 x d: tests/support/norm_cells.py:one_unit_norms): check's
    sets side by side widened its axis of size 1, which the module allocates so, and torch resized its out= with a
    UserWarning on stderr (its losses still agreed); an axis of a number for its size is never widened."""
    result = bptt("check", f"{NORM_CELLS}:one_unit_norms", "--backend", "all", "--steps", "3", "--batch", "2")
    assert_ok(result)
    assert result.stdout.count("all gradients agree with finite differences") == 3, result.stdout
    assert "Warning" not in result.stderr, result.stderr
