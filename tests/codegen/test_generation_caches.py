"""What codegen keeps between modules to generate them faster gives what generating afresh gives: the hidden model
(codegen/namer.py hide, shared by the backends) is keyed by the model's value, and the garbage collector's pause
(codegen/printing/collector.py) leaves the collector as it found it."""

import dataclasses
import gc

import pytest

from bptt.codegen.backends import BACKENDS
from bptt.codegen.namer import hide
from bptt.codegen.printing import collector
from bptt.derive.models import load


def test_the_hidden_model_is_the_models_own_not_another_with_its_name():
    model = load("gru")
    other = dataclasses.replace(model, mean=not model.mean)  # the same name and equations, another loss
    assert hide(model) == hide(dataclasses.replace(model)) and hide(model).mean == model.mean
    assert hide(other).mean == other.mean and hide(other) != hide(model)
    backend = BACKENDS["numpy"]
    sources = [backend.module_source(model), backend.module_source(other)]
    hide.cache_clear()
    assert sources[0] != sources[1]
    assert sources == [backend.module_source(model), backend.module_source(other)]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collectors_pause_leaves_it_as_it_was(enabled):
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with collector.paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError), collector.paused():
            raise ValueError
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
