"""`bptt check MODEL --lengths 5,3,1` (and --lengths random): the gradients of a right-padded batch against
finite differences of the loss that sums each sequence's own steps; a module that ignored lengths fails it;
bad --lengths exit 2 in one line."""

import dataclasses
import re

import numpy as np
import pytest

from bptt.app.verify.check import check
from bptt.runtime.options import Lengths
from bptt.tests.support.cli import assert_all_rows_ok, assert_error, bptt
from bptt.tests.support.modules import module_of


@pytest.mark.parametrize("model", ["elman", "linear"])
@pytest.mark.parametrize("lengths", ["5,3,1", "random"])
def test_check_with_lengths_passes(model, lengths):
    batch = "4" if lengths == "random" else "3"  # given lengths are the batch: a --batch given too is their count
    result = bptt("check", model, "--lengths", lengths, "--batch", batch, "--truncate", "chunk:2")
    assert result.returncode == 0, result.stderr
    assert f"lengths={lengths}" in result.stdout and (" B=3 " in result.stdout) == (lengths != "random")
    assert_all_rows_ok(result.stdout, module_of(model).PARAMS + tuple(module_of(model).STATES))


class Unpadded:
    """A NumPy module whose loss_and_grads drops lengths: the gradients of the padded steps' losses too."""

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        return getattr(self.module, name)

    def loss_and_grads(self, *args, lengths=None, **kwargs):
        return self.module.loss_and_grads(*args, **kwargs)


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_check_with_lengths_in_another_backend(backend):
    """The framework's padded gradients against finite differences, and against the NumPy module's."""
    pytest.importorskip(backend)
    result = bptt("check", "elman", "--lengths", "4,1,5", "--backend", backend)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lengths=4,1,5" in result.stdout and "against the NumPy module" in result.stdout
    assert "FAIL" not in result.stdout


@pytest.mark.parametrize("model", ["elman", "linear"])
def test_check_with_lengths_fails_a_module_that_ignores_them(model):
    module = module_of(model)
    assert all(row.ok for row in check(module, lengths=Lengths((5, 3, 1))))
    rows = check(Unpadded(module), lengths=Lengths((5, 3, 1)))
    assert not all(row.ok for row in rows), [dataclasses.astuple(row) for row in rows]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--lengths", "0,3"), "expected --lengths as integers from 1 to 999999999"),
        (("--lengths", "2.5,1"), "expected --lengths as integers from 1 to 999999999"),
        (("--lengths", "6,3,1"), "a length is above T=5; give --steps 6"),
        (("--lengths", "5,3", "--batch", "3"), "--batch 3 and --lengths 5,3 disagree: the lengths give the batch"),
    ],
)
def test_bad_lengths_exit_2(args, fragment):
    assert_error(bptt("check", "elman", *args), 2, fragment)


def test_lengths_parse_bounds_the_text():
    """No time in proportion to a number typed: a length of 10**9 or more is refused, not parsed."""
    with pytest.raises(ValueError, match="expected --lengths as integers from 1 to 999999999"):
        Lengths.parse("9" * 5000)
    with pytest.raises(ValueError, match="from 1 to 999999999 such as"):
        Lengths.parse("3,1000000000")
    assert Lengths.parse("3,999999999").steps == (3, 999999999)
    assert Lengths.parse(" 5, 3,1").steps == (5, 3, 1) and Lengths.parse("random").random
    assert np.array_equal(Lengths.parse("5,3,1").steps, [5, 3, 1])


def test_random_lengths_are_shown_and_given_back_check_the_same_batch():
    """`--lengths random` names the lengths it drew, so that a failure can be run again with --lengths: given back
    with the same seed they check the same batch (the lengths are drawn after every other array), row for row."""
    drawn = bptt("check", "elman", "--lengths", "random", "--batch", "5", "--steps", "6", "--seed", "3")
    assert drawn.returncode == 0, drawn.stderr
    header, *rows = drawn.stdout.splitlines()
    found = re.search(r" lengths=random \((\d+(?:,\d+)*)\) ", header)
    assert found, header
    lengths = [int(length) for length in found.group(1).split(",")]
    assert len(lengths) == 5 and all(1 <= length <= 6 for length in lengths), lengths
    given = bptt("check", "elman", "--lengths", found.group(1), "--steps", "6", "--seed", "3")
    assert given.returncode == 0, given.stderr
    assert given.stdout.splitlines()[1:] == rows
