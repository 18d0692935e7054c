"""A corpus of bad inputs, drawn by Hypothesis over every zoo module, random sizes (1..7), T (1..12),
B (1..5) and dtypes: each call raises a ValueError (no other exception) whose message is one line
and names the array or argument that was wrong."""

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_properties import DETERMINISTIC, instances, unfrozen

from bptt.tests.support.modules import forward, module_of
from bptt.tests.support.zoo import supporting

NAMES = supporting("cache_checks")


class Case:
    """Valid arrays for one module, and its calls with one of them replaced."""

    def __init__(self, module, sizes, steps, batch, seed, dtype):
        self.module, self.sizes, self.steps, self.batch = module, sizes, steps, batch
        self.params, self.xs, self.ys, self.initial = unfrozen(module, steps, batch, seed, sizes).cast(dtype)
        self.outputs, self.cache = forward(module, self.params, self.xs, self.ys, **self.initial)

    def arrays(self):
        """{name in messages: array} of every float array a user passes, d_outputs included."""
        found = {f"params['{k}']": v for k, v in self.params.items()}
        found.update({k: v for k, v in {**self.initial, "xs": self.xs, "ys": self.ys}.items() if v.dtype.kind == "f"})
        return {**found, "d_outputs": self.outputs}

    def call(self, replaced, value, truncate=None, rng=None):
        """The call that reads the array named `replaced`, given `value` in its place."""
        if replaced == "d_outputs":
            return lambda: self.module.backward(self.params, self.cache, value)
        if replaced == "cache":
            return lambda: self.module.backward(self.params, value, self.outputs)
        params, initial = dict(self.params), dict(self.initial)
        xs, ys = (value if replaced == key else array for key, array in (("xs", self.xs), ("ys", self.ys)))
        if replaced.startswith("params["):
            params[replaced[8:-2]] = value
        elif replaced == "params":
            params = value
        elif replaced in initial:
            initial[replaced] = value
        return lambda: self.module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng)


def non_finite(case, data):
    name = data.draw(st.sampled_from(sorted(case.arrays())), label="array")
    bad = case.arrays()[name].copy()
    index = data.draw(st.integers(0, bad.size - 1), label="index")
    bad.reshape(-1)[index] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]), label="value")
    if name.startswith("params["):  # backward scans them first; loss_and_grads looks at its result (test_bad_values)
        params = {**case.params, name[8:-2]: bad}
        return name, lambda: case.module.backward(params, case.cache, case.outputs)
    return name, case.call(name, bad)


def wrong_rank(case, data):
    name = data.draw(st.sampled_from(sorted(case.arrays())), label="array")
    array = case.arrays()[name]
    return name, case.call(name, data.draw(st.sampled_from([array[0], array[..., None]]), label="bad"))


def wrong_length(case, data):
    """The last axis of an array whose sizes are bound elsewhere one longer (xs' last axis, not its T or B)."""
    name = data.draw(st.sampled_from(sorted(set(case.arrays()) - {f"params['{case.module.PARAMS[0]}']"})))
    array = case.arrays()[name]
    return name, case.call(name, np.concatenate([array, array[..., :1]], axis=-1))


def wrong_dtype(case, data):
    """A float array in the other float dtype, an integer dtype, or a list (not the first parameter,
    whose dtype all others must have)."""
    name = data.draw(st.sampled_from(sorted(set(case.arrays()) - {f"params['{case.module.PARAMS[0]}']"})))
    array = case.arrays()[name]
    other = np.float32 if array.dtype == np.float64 else np.float64
    bad = data.draw(st.sampled_from([array.astype(other), array.astype(np.int64), array.tolist()]), label="bad")
    return name, case.call(name, bad)


def bad_labels(case, data):
    labels = {k: v for k, v in (("xs", case.xs), ("ys", case.ys)) if v.dtype.kind == "i"}
    if not labels:
        return wrong_dtype(case, data)
    name = data.draw(st.sampled_from(sorted(labels)), label="labels")
    bad = labels[name].copy()
    bad.reshape(-1)[data.draw(st.integers(0, bad.size - 1))] = data.draw(st.sampled_from([-1, 10**6]))
    return name, case.call(name, data.draw(st.sampled_from([bad, bad.astype(np.float64)]), label="bad"))


def bad_params(case, data):
    first = case.module.PARAMS[0]
    choices = [
        {k: v for k, v in case.params.items() if k != first},
        {**case.params, "W_typo": case.params[first]},
        {**case.params, next(iter(case.module.STATES)): case.params[first]},
        list(case.params.values()),
    ]
    return "params", case.call("params", data.draw(st.sampled_from(choices), label="params"))


def bad_truncate(case, data):
    k = case.steps
    choices = [("window", True), ("chunk", True), ("chunk", 0), ("window", 1.5), ("random", True), ("random", 1.5)]
    choices += [("random", 0.0), ("random", float("nan")), ("full", k), "window", ("window",), ("window", k, 1)]
    truncate = data.draw(st.sampled_from(choices), label="truncate")
    return "truncate", case.call("xs", case.xs, truncate, np.random.default_rng(0))


def bad_cache(case, data):
    keys = list(case.cache)
    choices = [{k: v for k, v in case.cache.items() if k != keys[-1]}, {**case.cache, "extra": case.cache[keys[0]]}]
    choices += [tuple(case.cache.values()), {**case.cache, keys[-1]: case.cache[keys[-1]][:-1]}]
    return "cache", case.call("cache", data.draw(st.sampled_from(choices), label="cache"))


def bad_dtype_or_size(case, data):
    module, rng = case.module, np.random.default_rng(0)
    size = data.draw(st.sampled_from(module.SIZES), label="size")
    choices = [
        ("dtype", {"dtype": data.draw(st.sampled_from([np.int64, np.float16, "int32", "nonsense"]))}),
        (f"size {size}", {size: data.draw(st.sampled_from([0, -1, True, 2.0]))}),
    ]
    name, change = data.draw(st.sampled_from(choices), label="change")
    kwargs = {"dtype": np.float64, **case.sizes, **change}
    make = data.draw(st.sampled_from([module.init_params, lambda r, **kw: module.random_inputs(r, 3, 2, **kw)]))
    return name, lambda: make(rng, **kwargs)


CORPUS = (non_finite, wrong_rank, wrong_length, wrong_dtype, bad_labels, bad_params, bad_truncate, bad_cache)
CORPUS += (bad_dtype_or_size,)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=150, **DETERMINISTIC)
@given(data=st.data())
def test_bad_input_is_a_one_line_value_error_naming_it(name, data):
    module = module_of(name)
    sizes, steps, batch, seed = data.draw(instances(module))
    dtype = data.draw(st.sampled_from(["float64", "float32"]), label="dtype")
    case = Case(module, sizes, steps, batch, seed, dtype)
    corruption = data.draw(st.sampled_from(CORPUS), label="corruption")
    named, call = corruption(case, data)
    event(corruption.__name__)
    with pytest.raises(Exception) as caught:
        call()
    error = caught.value
    assert type(error) is ValueError, f"{corruption.__name__} of {named}: {type(error).__name__}: {error}"
    text = str(error)
    assert "\n" not in text, f"{corruption.__name__} of {named}: a message of several lines:\n{text}"
    assert named in text, f"{corruption.__name__}: the message does not name {named}: {text}"


@pytest.mark.parametrize("name", NAMES)
def test_a_parameter_one_longer_is_named(name):
    """Every parameter with its last axis one longer, the others right: the one-line message names it, also where
    it alone holds a size the data holds too (lstm-layernorm's W_x and elman's U hold d, as xs does: the message
    names both, either may be wrong), as where another parameter disagrees. A one-hot model's U one longer reads
    labels of one class more, which is no error."""
    module = module_of(name)
    case, spec = Case(module, dict.fromkeys(module.SIZES, 3), 4, 2, 0, "float64"), module._SPEC
    for key, value in case.params.items():
        if "xs" in spec.labels and module.SHAPES[key][-1] == spec.data["xs"]:
            continue
        with pytest.raises(ValueError) as caught:
            case.call(f"params['{key}']", np.concatenate([value, value[..., :1]], axis=-1))()
        assert f"params['{key}']" in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
