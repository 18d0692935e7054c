"""derive.models.load builds a zoo model once per process and hands every caller the same frozen Model."""

import dataclasses

import pytest

from bptt.derive.models import ZOO, load, names
from bptt.derive.written import built


@pytest.mark.parametrize("name", names())
def test_a_zoo_model_is_built_once_and_equals_a_fresh_build(name):
    """The shared model is the one its factory builds now (the same equations, the same sums as written), and it
    cannot be changed by one caller under another's feet."""
    shared, fresh = load(name), built(ZOO[name])
    assert shared is load(name)
    assert shared == fresh and shared.written == fresh.written and shared.spec == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        shared.steps = ()
