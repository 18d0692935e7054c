"""Bad input to a generated module is a ValueError whose message names the array,
the expected and the actual shape (or dtype, or value); never another exception."""

import re

import numpy as np
import pytest

from bptt.derive.models import load, names
from bptt.tests.support.modules import forward, module_of

NAMES = names()
T, B = 3, 2


def facts(name):
    """What the model says about its arrays: size names and which sequences are integer labels."""
    model = load(name)
    return {
        "x": str(model.inputs[0].rows),  # size of an input vector, or number of input classes
        "x_labels": model.inputs[0].role == "label",
        "o": str(model.outputs[0][0].rows),  # size of an output vector
        "y_labels": model.concrete_loss().target.role == "label",
    }


def message(*parts):
    """A regex matching a message that contains every part (regexes), in any order."""
    return "".join(f"(?=.*(?:{part}))" for part in parts)


def shape(value):
    """Regex for a shape printed as a tuple, e.g. (3, 2)."""
    return re.escape(str(tuple(value)))


def number(value):
    """Regex for a number standing on its own: 4 in "label 4", not in "range(4)" or "q=4"."""
    return rf"(?<![\w=(]){re.escape(str(value))}\b"


def setup(name):
    """module, model facts, sizes (distinct: 2, 3, 4, ...), params, xs, ys, initial state."""
    module = module_of(name)
    sizes = {size: 2 + i for i, size in enumerate(module.SIZES)}
    rng = np.random.default_rng(0)
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, T, B, **sizes)
    initial = {key: np.zeros((B, sizes[size])) for key, size in module.STATES.items()}
    return module, facts(name), sizes, params, xs, ys, initial


def matrices(name):
    """(model, parameter) for every non-square matrix parameter: its transpose has another shape."""
    return [(name, str(p)) for p in load(name).params if p.shape[1] != 1 and p.shape[0] != p.shape[1]]


def calls(module, params, xs, ys, initial):
    """forward and loss_and_grads on the same arguments: both must validate them."""
    return (
        lambda: forward(module, params, xs, ys, **initial),
        lambda: module.loss_and_grads(params, xs, ys, **initial),
    )


def expect_labels(name, bad, classes, call):
    """call() rejects labels `bad` (out of range, or not integers) naming the array and range(classes)."""
    for value in (-1, classes):
        labels = bad.copy()
        labels[1, 0] = value
        with pytest.raises(ValueError, match=message(rf"\b{name}\b", number(value), rf"range\({classes}\)")):
            call(labels)
    for labels in (bad.astype(np.float64), bad.astype(np.float32), bad.tolist()):
        with pytest.raises(ValueError, match=message(rf"\b{name}\b", "integer")):
            call(labels)


@pytest.mark.parametrize("name", NAMES)
def test_xs_of_wrong_rank(name):
    """xs missing its time axis, or with an extra axis: named, with both shapes."""
    module, fact, sizes, params, xs, ys, initial = setup(name)
    x = fact["x"]
    expected = r"\(T, B\)" if fact["x_labels"] else rf"T, B, {x}={sizes[x]}"
    for bad in (xs[0], xs[..., None]):
        for call in calls(module, params, bad, ys, initial):
            with pytest.raises(ValueError, match=message(r"\bxs\b", shape(bad.shape), expected)):
                call()


@pytest.mark.parametrize("name", NAMES)
def test_xs_with_wrong_last_dim_or_bad_labels(name):
    """Input vectors one entry too long; or, for one-hot inputs given as labels,
    labels out of range and labels that are not integers."""
    module, fact, sizes, params, xs, ys, initial = setup(name)
    x = fact["x"]
    if fact["x_labels"]:
        expect_labels("xs", xs, sizes[x], lambda bad: module.loss_and_grads(params, bad, ys, **initial))
        return
    wide = np.concatenate([xs, xs[..., :1]], axis=-1)
    for call in calls(module, params, wide, ys, initial):
        with pytest.raises(ValueError, match=message(r"\bxs\b", shape(wide.shape), rf"{x}={sizes[x]}\)")):
            call()


@pytest.mark.parametrize("steps, batch", ((0, B), (T, 0)))
@pytest.mark.parametrize("name", NAMES)
def test_empty_xs(name, steps, batch):
    """No time steps or an empty batch leaves no loss to average: loss_and_grads raises a
    ValueError naming xs (not ZeroDivisionError, IndexError or a NaN loss)."""
    module, _, _, params, xs, ys, initial = setup(name)
    empty = {key: h[:batch] for key, h in initial.items()}
    with pytest.raises(ValueError, match=message(r"\bxs\b", shape(xs[:steps, :batch].shape))):
        module.loss_and_grads(params, xs[:steps, :batch], ys[:steps, :batch], **empty)


@pytest.mark.parametrize("name", NAMES)
def test_initial_state_with_wrong_shape(name):
    """Each initial state too wide, with the wrong batch, or without a batch axis."""
    module, _, sizes, params, xs, ys, initial = setup(name)
    for key, size in module.STATES.items():
        for bad in (np.zeros((B, sizes[size] + 1)), np.zeros((B + 1, sizes[size])), np.zeros(sizes[size])):
            for call in calls(module, params, xs, ys, {**initial, key: bad}):
                with pytest.raises(
                    ValueError, match=message(rf"\b{key}\b", shape(bad.shape), rf"B={B}, {size}={sizes[size]}")
                ):
                    call()


def extent(dim, sizes):
    """A dim's extent: a size's (`h`), or a multiple of one's (`4*h`: four stacked blocks)."""
    count, _, size = dim.rpartition("*")
    return int(count or 1) * sizes[size]


@pytest.mark.parametrize("name, key", [case for name in NAMES for case in matrices(name)])
def test_transposed_parameter(name, key):
    """The message names the transposed parameter itself, not a later one that disagrees with it."""
    module, _, sizes, params, xs, ys, initial = setup(name)
    rows, cols = module.SHAPES[key]
    bad = {**params, key: params[key].T}
    expected = rf"\({re.escape(rows)}(={extent(rows, sizes)})?, {re.escape(cols)}(={extent(cols, sizes)})?\)"
    for call in calls(module, bad, xs, ys, initial):
        with pytest.raises(ValueError, match=message(re.escape(f"params['{key}']"), shape(bad[key].shape), expected)):
            call()


@pytest.mark.parametrize("name", NAMES)
def test_missing_parameter(name):
    """params without one of its keys: the message names the missing key."""
    module, _, _, params, xs, ys, initial = setup(name)
    for key in module.PARAMS:
        bad = {k: v for k, v in params.items() if k != key}
        for call in calls(module, bad, xs, ys, initial):
            with pytest.raises(ValueError, match=message("missing", rf"\b{key}\b")):
                call()


@pytest.mark.parametrize("name", NAMES)
def test_mixed_dtypes(name):
    """float32 xs (unless xs are labels) or h0 with float64 params, or one float32 parameter among float64 ones."""
    module, fact, _, params, xs, ys, initial = setup(name)
    if not fact["x_labels"]:
        for call in calls(module, params, xs.astype(np.float32), ys, initial):
            with pytest.raises(ValueError, match=message(r"\bxs\b", "float32", "float64")):
                call()
    for key in module.STATES:
        for call in calls(module, params, xs, ys, {**initial, key: initial[key].astype(np.float32)}):
            with pytest.raises(ValueError, match=message(rf"\b{key}\b", "float32", "float64")):
                call()
    for key in module.PARAMS[1:]:
        bad = {**params, key: params[key].astype(np.float32)}
        for call in calls(module, bad, xs, ys, initial):
            with pytest.raises(ValueError, match=message(re.escape(f"params['{key}']"), "float32", "float64")):
                call()


@pytest.mark.parametrize("name", NAMES)
def test_integer_params(name):
    """All parameters integer, or one integer parameter among float64 ones."""
    module, _, _, params, xs, ys, initial = setup(name)
    ints = {k: np.ones(v.shape, dtype=np.int64) for k, v in params.items()}
    for call in calls(module, ints, xs.astype(np.int64), ys, initial):
        with pytest.raises(ValueError, match=message(re.escape(f"params['{module.PARAMS[0]}']"), "int64", "float")):
            call()
    for key in module.PARAMS:
        bad = {**params, key: ints[key]}
        for call in calls(module, bad, xs, ys, initial):
            with pytest.raises(ValueError, match=message(re.escape(f"params['{key}']"), "int64", "float")):
                call()


@pytest.mark.parametrize("name", NAMES)
def test_d_outputs_with_wrong_shape(name):
    """backward with d_outputs too wide, with T and B swapped, without the time axis, or in float32."""
    module, fact, sizes, params, xs, ys, initial = setup(name)
    o = fact["o"]
    outputs, cache = forward(module, params, xs, ys, **initial)
    wide = np.zeros(outputs.shape[:-1] + (sizes[o] + 1,))
    swapped = np.zeros((B, T, sizes[o]))
    for bad in (wide, swapped, outputs[0]):
        with pytest.raises(
            ValueError, match=message(r"\bd_outputs\b", shape(bad.shape), rf"T={T}, B={B}, {o}={sizes[o]}")
        ):
            module.backward(params, cache, bad)
    with pytest.raises(ValueError, match=message(r"\bd_outputs\b", "float32", "float64")):
        module.backward(params, cache, outputs.astype(np.float32))


@pytest.mark.parametrize("name", NAMES)
def test_ys_with_wrong_shape(name):
    """Targets with the wrong batch, the wrong number of steps, too wide, or an extra axis."""
    module, fact, sizes, params, xs, ys, initial = setup(name)
    expected = rf"T={T}, B={B}" + ("" if fact["y_labels"] else rf", {fact['o']}={sizes[fact['o']]}")
    for bad in (ys[:, :1], ys[:1], np.concatenate([ys, ys[..., :1]], axis=-1), ys[..., None]):
        with pytest.raises(ValueError, match=message(r"\bys\b", shape(bad.shape), expected)):
            module.loss_and_grads(params, xs, bad, **initial)


@pytest.mark.parametrize("name", [n for n in NAMES if facts(n)["y_labels"]])
def test_bad_labels(name):
    """Target labels -1 and q (out of range), and float labels."""
    module, fact, sizes, params, xs, ys, initial = setup(name)
    expect_labels("ys", ys, sizes[fact["o"]], lambda bad: module.loss_and_grads(params, xs, bad, **initial))


@pytest.mark.parametrize("name", NAMES)
def test_bad_sizes(name):
    """init_params and random_inputs reject a missing size and a non-positive one, naming it."""
    module = module_of(name)
    rng = np.random.default_rng(0)
    sizes = {size: 2 + i for i, size in enumerate(module.SIZES)}
    makers = (lambda **s: module.init_params(rng, **s), lambda **s: module.random_inputs(rng, T, B, **s))
    for make in makers:
        for size in module.SIZES:
            with pytest.raises(ValueError, match=message("missing", rf"\b{size}\b")):
                make(**{k: v for k, v in sizes.items() if k != size})
            for value in (0, -3):
                with pytest.raises(ValueError, match=message(rf"\b{size}\b", "positive", number(value))):
                    make(**{**sizes, size: value})
