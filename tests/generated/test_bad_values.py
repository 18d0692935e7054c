"""Bad values given to a generated module are ValueErrors that name what was wrong: nan or inf in
any array the user passes, unknown parameters, dtypes the modules do not compute in, a bool
where a length or a probability belongs, and a cache from another model or shape."""

import re

import numpy as np
import pytest
from test_bad_input import B, T, calls, facts, message, setup

from bptt.tests.support.modules import forward, module_of, passes_of, runtime_of
from bptt.tests.support.zoo import supporting

BAD_NUMBERS = (np.nan, np.inf, -np.inf)


def poisoned(array, value, index=-1):
    """A copy of array with its entry at flat position index set to value."""
    copy = array.copy()
    copy.reshape(-1)[index] = value
    return copy


def non_finite(name, value, array):
    """Regex for the message about `value` at the last entry of `array` named `name`."""
    index = tuple(int(i) for i in np.unravel_index(array.size - 1, array.shape))
    return message(re.escape(name), rf"(?<![\w-]){re.escape(str(value))}\b", re.escape(str(index)), "finite")


@pytest.mark.parametrize("name", supporting("value_checks"))
def test_non_finite_inputs_initial_states_and_parameters(name):
    """nan, inf or -inf in xs (unless labels), in an initial state or in a parameter: forward raises a
    ValueError naming the array and the value, before computing anything; so does loss_and_grads for xs and
    initial states (its parameters: test_loss_and_grads_names_a_non_finite_parameter_from_its_result)."""
    module, fact, _, params, xs, ys, initial = setup(name)
    for value in BAD_NUMBERS:
        cases = [] if fact["x_labels"] else [("xs", poisoned(xs, value), params, initial)]
        cases += [(key, poisoned(h, value), params, {**initial, key: poisoned(h, value)}) for key, h in initial.items()]
        cases += [
            (f"params['{k}']", poisoned(p, value), {**params, k: poisoned(p, value)}, initial)
            for k, p in params.items()
        ]
        for label, bad, bad_params, bad_initial in cases:
            bad_xs = bad if label == "xs" else xs
            forward_call, loss_and_grads_call = calls(module, bad_params, bad_xs, ys, bad_initial)
            for call in (forward_call,) if label.startswith("params") else (forward_call, loss_and_grads_call):
                with pytest.raises(ValueError, match=non_finite(label, value, bad)):
                    call()


@pytest.mark.parametrize("name", supporting("value_checks"))
def test_loss_and_grads_names_a_non_finite_parameter_from_its_result(name):
    """loss_and_grads makes no pass over the parameters: a nan or inf in one is named (with its first bad
    entry) when the loss or an initial state's gradient comes out non-finite, and only then are they scanned.
    A parameter all nan always reaches the loss; inf may be hidden by a saturated activation, and then the
    result is finite."""
    module, _, _, params, xs, ys, initial = setup(name)
    for key, p in params.items():
        bad, first = np.full_like(p, np.nan), np.zeros((1,) * p.ndim)  # the message names entry (0, ..., 0)
        with pytest.raises(ValueError, match=non_finite(f"params['{key}']", np.nan, first)):
            module.loss_and_grads({**params, key: bad}, xs, ys, **initial)
        for value in (np.inf, -np.inf):
            try:
                with np.errstate(over="ignore", invalid="ignore"):
                    loss, grads = module.loss_and_grads({**params, key: poisoned(p, value)}, xs, ys, **initial)
            except ValueError as error:
                assert re.search(non_finite(f"params['{key}']", value, p), str(error)), error
            else:
                assert np.isfinite(loss) and all(np.isfinite(grads[k]).all() for k in module.STATES), (key, value)


@pytest.mark.parametrize("known", [False, True], ids=["first-call", "known-kinds"])
@pytest.mark.parametrize("name", supporting("value_checks"))
def test_loss_and_grads_reads_finite_parameters_once(name, known, monkeypatch):
    """A call whose result is finite looks at no parameter's values: the checks it makes of them are of keys,
    dtypes and shapes, whose cost does not grow with the parameters' sizes. Whether or not calls of the same
    kinds of arguments came before (then forward scans the parameters' values by the passes' all_finite)."""
    module, _, _, params, xs, ys, initial = setup(name)
    passes = passes_of(module)
    if known:
        module.loss_and_grads(params, xs, ys, **initial)
        module.forward(params, xs, **initial) if not module.TEACHER_FORCED else None
    else:  # as in a fresh process, whatever this worker ran before
        for known_kinds in (passes.spec.passed, passes.spec.calls):
            for kinds in list(known_kinds):
                monkeypatch.delitem(known_kinds, kinds)
    checks = runtime_of(module)  # the runtime the module's checks are in
    scanned = []
    for owner, helper in ((checks, "_all_finite"), (checks, "_check_array"), (type(passes), "all_finite")):
        original = getattr(owner, helper)

        def spy(*args, original=original, **kwargs):
            arrays = args[0] if original.__name__ == "_all_finite" else [args[1]]
            scanned.extend(a for a in arrays if any(a is p for p in params.values()))
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, helper, staticmethod(spy) if isinstance(owner, type) else spy)
    module.loss_and_grads(params, xs, ys, **initial)
    assert not scanned
    module.forward(params, xs, **initial) if not module.TEACHER_FORCED else None
    assert scanned or module.TEACHER_FORCED, "the spy sees forward's scan of the parameters"


@pytest.mark.parametrize("name", [n for n in supporting("value_checks") if not facts(n)["y_labels"]])
def test_non_finite_targets(name):
    """Float targets ys with nan or inf: loss_and_grads and losses name ys."""
    module, _, _, params, xs, ys, initial = setup(name)
    outputs, _ = forward(module, params, xs, ys, **initial)
    for value in BAD_NUMBERS:
        bad = poisoned(ys, value)
        for call in (
            lambda b=bad: module.loss_and_grads(params, xs, b, **initial),
            lambda b=bad: module.losses(outputs, b),
        ):
            with pytest.raises(ValueError, match=non_finite("ys", value, bad)):
                call()


@pytest.mark.parametrize("name", supporting("value_checks"))
def test_non_finite_d_outputs(name):
    """backward with nan or inf in d_outputs names d_outputs; check_finite=False lets them through."""
    module, _, _, params, xs, ys, initial = setup(name)
    outputs, cache = forward(module, params, xs, ys, **initial)
    for value in BAD_NUMBERS:
        bad = poisoned(outputs, value)
        with pytest.raises(ValueError, match=non_finite("d_outputs", value, bad)):
            module.backward(params, cache, bad)
        with np.errstate(invalid="ignore", over="ignore"):
            grads = module.backward(params, cache, bad, check_finite=False)
        assert not all(np.isfinite(g).all() for g in grads.values()), f"{name}: {value} in d_outputs left no trace"


def test_overflowing_forward_pass_is_a_nan_loss_not_an_error():
    """Finite inputs whose forward pass overflows (a linear RNN with a large W_hh) are not bad input:
    loss_and_grads returns an infinite or nan loss, as NumPy would, rather than blaming d_outputs."""
    module, _, sizes, params, xs, ys, initial = setup("linear")
    steps = 400
    xs, ys = module.random_inputs(np.random.default_rng(1), steps, B, **sizes)
    explosive = {**params, "W_hh": 10 * np.eye(sizes["h"])}
    with np.errstate(over="ignore", invalid="ignore"):
        loss, grads = module.loss_and_grads(explosive, xs, ys)
    assert not np.isfinite(loss)


@pytest.mark.parametrize("name", supporting("value_checks"))
def test_unknown_parameter_keys(name):
    """params with a key the model does not have (an initial state's gradient, a typo): named."""
    module, _, _, params, xs, ys, initial = setup(name)
    first = module.PARAMS[0]
    forward_mode = name in supporting("forward_mode_grads")
    for extra in ({"bogus": params[first]}, {next(iter(module.STATES)): params[first]}, {7: params[first]}):
        bad = {**params, **extra}
        key = re.escape(repr(next(iter(extra))))
        for call in (
            *calls(module, bad, xs, ys, initial),
            *[lambda b=bad: module.forward_mode_grads(b, xs, ys, **initial)] * forward_mode,
        ):
            with pytest.raises(ValueError, match=message("unknown", rf"(?<!\w){key}(?!\w)")):
                call()


@pytest.mark.parametrize("name", supporting("value_checks"))
def test_init_params_and_random_inputs_refuse_other_dtypes(name):
    """Only float32 and float64, as everywhere else; the message names the dtype given."""
    module = module_of(name)
    sizes = {size: 2 + i for i, size in enumerate(module.SIZES)}
    rng = np.random.default_rng(0)
    for dtype in (np.int64, np.int32, np.float16, np.complex128, bool, "int8", "no such type"):
        shown = np.dtype(dtype).name if dtype != "no such type" else dtype
        for make in (
            lambda d: module.init_params(rng, d, **sizes),
            lambda d: module.random_inputs(rng, T, B, d, **sizes),
        ):
            with pytest.raises(ValueError, match=message(r"\bdtype\b", re.escape(shown), "float32 or float64")):
                make(dtype)
    for dtype in (np.float32, "float32", np.dtype("float64")):
        assert all(p.dtype == np.dtype(dtype) for p in module.init_params(rng, dtype, **sizes).values())


@pytest.mark.parametrize("name", supporting("value_checks"))
def test_a_bool_is_not_a_length_a_size_or_a_probability(name):
    """truncate=('window', True), ('chunk', True), ('random', True) and a size True are refused."""
    module, _, sizes, params, xs, ys, initial = setup(name)
    rng = np.random.default_rng(0)
    truncated = (("window", True), ("chunk", True), ("window", False), ("random", True))
    for truncate in truncated if name in supporting("truncate") else ():
        with pytest.raises(ValueError, match=message(re.escape(f"('{truncate[0]}'"), re.escape(f"got {truncate[1]}"))):
            module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng)
    size = module.SIZES[0]
    with pytest.raises(ValueError, match=message(rf"\b{size}\b", "positive", "True")):
        module.init_params(rng, **{**sizes, size: True})


def foreign_cache(name):
    """The cache of another zoo model's forward pass, one whose cache has other keys.

    (Two models whose caches have the same keys and shapes, such as jordan and elman-jordan
    at the same sizes, cannot be told apart by their caches.)"""
    keys = set(module_of(name).CACHE)
    other = next(n for n in supporting("value_checks") if set(module_of(n).CACHE) != keys)
    module, _, _, params, xs, ys, initial = setup(other)
    return forward(module, params, xs, ys, **initial)[1]


@pytest.mark.parametrize("name", supporting("value_checks"))
def test_cache_from_another_model_shape_or_dtype(name):
    """backward with a cache that forward did not return for these parameters: a ValueError
    (never a KeyError) naming the cache, or the array in it whose shape or dtype is wrong."""
    module, _, sizes, params, xs, ys, initial = setup(name)
    outputs, cache = forward(module, params, xs, ys, **initial)
    d_outputs = np.ones_like(outputs)
    foreign = foreign_cache(name)
    wider = {size: n + 1 for size, n in sizes.items()}
    rng = np.random.default_rng(1)
    wide_params = module.init_params(rng, **wider)
    wide_xs, wide_ys = module.random_inputs(rng, T, B, **wider)
    _, wide_cache = forward(module, wide_params, wide_xs, wide_ys)
    first, *rest = module.CACHE
    expected_keys = re.escape(", ".join(module.CACHE))
    missing_one = {k: v for k, v in cache.items() if k != rest[-1]}
    cases = [
        (foreign, message(r"\bcache\b", re.escape(", ".join(map(repr, foreign))), expected_keys)),
        ((outputs, cache), message(r"\bcache\b", "dict", "tuple")),
        (missing_one, message(r"\bcache\b", re.escape(", ".join(map(repr, missing_one))), expected_keys)),
        ({**cache, "extra": cache[first]}, message(r"\bcache\b", "'extra'", expected_keys)),
        (wide_cache, message(r"cache\['\w+'\] (has shape|holds label)")),
        ({**cache, rest[0]: cache[rest[0]][1:]}, message(re.escape(f"cache['{rest[0]}']"), rf"T\+1={T + 1}")),
        ({**cache, rest[0]: cache[rest[0]].astype(np.float32)}, message(re.escape(f"cache['{rest[0]}']"), "float32")),
    ]
    for bad, expected in cases:
        with pytest.raises(ValueError, match=expected):
            module.backward(params, bad, d_outputs)
    with pytest.raises(ValueError, match=message(r"\bd_outputs\b", rf"T={T - 1}")):
        module.backward(params, forward(module, params, xs[1:], ys[1:], **initial)[1], d_outputs)
