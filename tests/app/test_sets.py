"""Several parameter sets in one forward pass (app/verify/sets.py): a wide instance's loss at each change is
the plain loss there, a cell that mixes the sets gets no layout, a set that overflows leaves the others
right, and the check's derivatives from wide passes are those of plain passes."""

import types

import numpy as np
import pytest
import sympy as sp

from bptt.app.verify import check as checking
from bptt.app.verify.check import MARGIN, differences, load_module
from bptt.app.verify.problem import problem
from bptt.app.verify.sets import Layout
from bptt.derive.models import load, names
from bptt.derive.reductions import Reduce
from bptt.tests.support.modules import module_of

TRUNCATIONS = [None, ("window", 2), ("chunk", 3)]
APART = [name for name in names() if not module_of(name).TEACHER_FORCED]


def plain_loss(instance, truncate, name, index, value):
    """instance.loss(truncate) with one entry changed, one forward pass as without sets."""
    array = {**instance.params, **instance.initial}[name]
    saved = array[index]
    array[index] = value
    try:
        return instance.loss(truncate)
    finally:
        array[index] = saved


def random_changes(instance, count, rng):
    """count (array name, index, value) changes of random entries of the parameters and initial states."""
    arrays = {**instance.params, **instance.initial}
    changes = []
    for _ in range(count):
        name = sorted(arrays)[rng.integers(len(arrays))]
        index = tuple(int(rng.integers(n)) for n in arrays[name].shape)
        changes.append((name, index, arrays[name][index] + rng.standard_normal()))
    return changes


def reduces(model):
    """Whether a model's cell reduces over the units of a vector (a norm's mean and deviation)."""
    return any(isinstance(node, Reduce) for _, rhs in model.steps for node in sp.preorder_traversal(rhs))


REDUCING = [name for name in APART if reduces(load(name))]
STACKED = ["examples/torch_lstm.py:lstm", "examples/lstm_2layer.py:lstm"]  # W_ih of 4h x d, and its four gates


@pytest.mark.parametrize("truncate", TRUNCATIONS, ids=["full", "window", "chunk"])
@pytest.mark.parametrize("name", [name for name in APART if name not in REDUCING] + STACKED)
def test_wide_losses_are_the_plain_losses(name, truncate):
    """Every zoo model that is not teacher-forced and does not reduce over its units, and users' cells of stacked
    4h x d weights whose slices are the gates, gets a layout, under which the losses at 2 chunks and a part (the
    last padded) of random changes are the plain losses at them, to 1e-12."""
    model = load(name)
    instance = problem(load_module(model, from_zoo=not model.spec), 7, 3, seed=1)
    layout = Layout.find(instance, truncate)
    assert layout is not None and layout.sets > 1
    changes = random_changes(instance, 2 * layout.sets + 3, np.random.default_rng(2))
    wide = layout.losses(instance, truncate, changes)
    plain = [plain_loss(instance, truncate, *change) for change in changes]
    np.testing.assert_allclose(wide, plain, rtol=1e-12, atol=0)


@pytest.mark.parametrize("truncate", TRUNCATIONS, ids=["full", "window", "chunk"])
@pytest.mark.parametrize("name", REDUCING)
def test_a_cell_that_reduces_over_its_units_is_laid_out_right_and_not_widened(name, truncate):
    """A norm's mean over a wide vector's units mixes the sets: Layout.find offers no layout (the check takes a
    plain pass per set). Yet its arrays are laid out right, 4h stacks too: two equal sets side by side, whose
    means are each set's, give the plain loss twice."""
    instance = problem(module_of(name), 7, 3, seed=1)
    assert Layout.find(instance, truncate) is None
    values = {**instance.params, **instance.initial}
    wide = Layout((), 2).widen(instance, [values, values]).loss(truncate)
    np.testing.assert_allclose(wide, [instance.loss(truncate)] * 2, rtol=1e-12, atol=0)


def test_the_zoo_has_a_cell_that_reduces_over_its_units():
    assert "lstm-layernorm" in REDUCING


@pytest.mark.parametrize("name", [name for name in names() if name not in APART])
def test_a_teacher_forced_cell_is_not_widened(name):
    assert Layout.find(problem(module_of(name), 5, 3, seed=0)) is None


def test_a_cell_that_mixes_its_sets_gets_no_layout():
    """A forward pass whose outputs are scaled by their sum over units would mix the sets' blocks (a sum
    added to each would not: a softmax does not see it): Layout.find refuses every layout of it."""
    module = module_of("elman")
    mixing = types.ModuleType("mixing")
    mixing.__dict__.update(module.__dict__)

    def forward(params, xs, **initial):
        outputs, cache = module.forward(params, xs, **initial)
        return outputs * (1 + 0.1 * outputs.sum(axis=-1, keepdims=True)), cache

    mixing.forward = forward
    assert Layout.find(problem(module, 5, 3, seed=0)) is not None
    assert Layout.find(problem(mixing, 5, 3, seed=0)) is None


def test_a_set_that_overflows_leaves_the_others_right():
    """A change that makes the linear model's states overflow gives its own non-finite loss; the other
    sets of its chunk (which the overflow reaches through the blocks' zeros) still get their plain losses."""
    instance = problem(module_of("linear"), 7, 3, seed=0)
    layout = Layout.find(instance)
    changes = random_changes(instance, layout.sets, np.random.default_rng(3))
    changes[4] = ("W_hh", (0, 0), 1e200)
    with np.errstate(over="ignore", invalid="ignore"):
        wide = layout.losses(instance, None, changes)
        plain = [plain_loss(instance, None, *change) for change in changes]
    assert not np.isfinite(wide[4])
    np.testing.assert_allclose(wide, plain, rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["lstm", "elman-onehot"])
def test_derivatives_from_wide_passes_are_those_of_plain_passes(name, monkeypatch):
    """Ridders' derivatives of every entry, the ladders in step on wide passes and one after another on
    plain passes, agree within MARGIN times their error estimates."""
    instance = problem(module_of(name), 6, 3, seed=4)
    arrays = {**instance.params, **instance.initial}
    requests = [(key, index, 0.0) for key, array in arrays.items() for index in np.ndindex(array.shape)]
    wide = np.array(differences(instance, None, requests))
    monkeypatch.setattr(checking.Layout, "find", staticmethod(lambda instance, truncate=None: None))
    plain = np.array(differences(instance, None, requests))
    gap = np.abs(wide[:, 0] - plain[:, 0])
    assert np.all(gap <= MARGIN * (wide[:, 1] + plain[:, 1])), np.max(gap / (wide[:, 1] + plain[:, 1]))
    assert np.median(gap / np.maximum(np.abs(plain[:, 0]), 1e-300)) < 1e-9
