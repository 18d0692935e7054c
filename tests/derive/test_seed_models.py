"""What the seed models (004's one-hot Elman, 001's teacher-forced Jordan and
Elman-Jordan networks) must show beyond correct gradients."""

import inspect

import numpy as np
import pytest

from bptt.derive.bptt import derive
from bptt.derive.models import load
from bptt.documents.render import document
from bptt.generated import elman_jordan, elman_onehot, jordan


def test_onehot_inputs_are_looked_up_and_scattered_never_densified():
    """U onehot(x_t) is a column lookup and dL/dU a scatter-add: no (T, B, vocabulary) one-hot of the inputs."""
    forward = inspect.getsource(elman_onehot._forward)
    backward = "".join(inspect.getsource(f) for f in (elman_onehot._gradients, elman_onehot._adjoints))
    assert "U.T[x]" in forward and "_onehot(x" not in forward
    assert "_scatter_columns(" in backward and "_onehot(x" not in backward


def test_onehot_gradient_of_u_lands_in_the_looked_up_columns_only():
    module = elman_onehot
    rng = np.random.default_rng(0)
    sizes = {"d": 50, "h": 4, "q": 6}
    params = module.init_params(rng, **sizes)
    xs = np.array([[3, 7], [7, 11]])
    ys = rng.integers(0, 6, size=(2, 2))
    _, grads = module.loss_and_grads(params, xs, ys)
    used = np.flatnonzero(np.abs(grads["U"]).sum(axis=0))
    assert set(used) == {3, 7, 11}


def test_word_index_outside_the_vocabulary_is_a_clear_error():
    module = elman_onehot
    rng = np.random.default_rng(0)
    params = module.init_params(rng, d=5, h=3, q=4)
    ys = np.zeros((2, 1), dtype=int)
    for bad in (5, -1):
        xs = np.array([[0], [bad]])
        with pytest.raises(ValueError, match=rf"xs holds label {bad}; labels must be in range\(5\) \(d=5\)"):
            module.loss_and_grads(params, xs, ys)


def test_jordan_under_teacher_forcing_has_no_recursion():
    """No state adjoint recurs: the derivation has no state recursion, shows the cut
    term, and the generated backward pass has no time loop."""
    model = load("jordan")
    derivation = derive(model)
    assert derivation.states == {}
    assert [c.when for c in derivation.forced[model.states[0]]] == ["next"]
    text = document(model, "md")
    assert "no gradient flows back through time" in text
    assert "the term is cut" in text
    assert "for t in range" not in inspect.getsource(jordan._gradients) + inspect.getsource(jordan._adjoints)


def test_elman_jordan_backpropagates_through_the_hidden_path_only():
    model = load("elman-jordan")
    derivation = derive(model)
    assert [seq.name for seq in derivation.states] == ["h"]
    assert [seq.name for seq in derivation.forced] == ["o"]
    assert "Backpropagation through time runs through $\\mathbf{h}_{t}$ only." in document(model, "md")


def test_teacher_forcing_feeds_the_true_previous_label():
    """The output at t depends on y_{t-1} (forced in) but not on the model's own earlier outputs."""
    module = elman_jordan
    rng = np.random.default_rng(1)
    params = module.init_params(rng, d=2, h=3, q=4)
    xs, ys = module.random_inputs(rng, 4, 2, d=2, h=3, q=4)
    outputs, _ = module.forward(params, xs, ys)
    changed = ys.copy()
    changed[1] = (changed[1] + 1) % 4
    moved, _ = module.forward(params, xs, changed)
    np.testing.assert_array_equal(moved[:2], outputs[:2])
    assert not np.allclose(moved[2], outputs[2])
