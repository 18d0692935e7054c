"""A module of a model with reverse-time states checks its arguments once, on the whole model's, before any group
of steps runs: a bad value is named in the user's notation (params['W_b'], xs, h_b0, ys, lengths), with the words
of a forward-only module's message, never under a group's stacked names (side_x, sweep2); backward refuses a
corrupted cache (a missing key, a wrong shape, another model's, another call's lengths) in one line naming it. In
NumPy, torch and JAX, with checkpoints= too."""

import functools

import numpy as np
import pytest

from bptt.tests.support import oracle
from bptt.tests.support.modules import module_of

T, B = 4, 2
SIZES = {"d": 2, "h": 3, "q": 4}
BACKENDS = ("numpy", "torch", "jax")
GROUP_WORDS = ("side", "sweep")  # what a group's names hold


def _modules(backend):
    suffix = "" if backend == "numpy" else f"_{backend}"
    return module_of("birnn" + suffix), module_of("elman" + suffix)


def _problem(module):
    """params, xs, ys, initial states as NumPy arrays (float64)."""
    rng = np.random.default_rng(0)
    numpy = module_of("birnn")
    params = numpy.init_params(rng, **SIZES)
    xs, ys = numpy.random_inputs(rng, T, B, **SIZES)
    initial = {key: 0.1 * rng.standard_normal((B, SIZES[size])) for key, size in module.STATES.items()}
    return params, xs, ys, initial


def _message(call):
    with pytest.raises(ValueError) as caught:
        call()
    text = str(caught.value)
    assert "\n" not in text, text
    return text


def _in(module, value):
    to, _ = oracle._framework(module)
    if isinstance(value, dict):
        return {key: _in(module, item) for key, item in value.items()}
    return to(value)


def _poisoned(array, value):
    copy = array.copy()
    copy.reshape(-1)[-1] = value
    return copy


@pytest.mark.parametrize("checkpoints", [None, 2])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bad_value_is_named_in_the_users_notation(backend, checkpoints):
    """nan in a parameter of the reverse group or in an initial state, a parameter in another dtype, a state of
    another shape: forward and loss_and_grads (in bounded memory too) name it as the user wrote it, and no group's
    name."""
    module, _ = _modules(backend)
    params, xs, ys, initial = _problem(module)

    def calls(params=params, initial=initial):
        arguments = _in(module, params), _in(module, xs), _in(module, ys), _in(module, initial)
        return (
            lambda: module.forward(arguments[0], arguments[1], **arguments[3]),
            lambda: module.loss_and_grads(*arguments[:3], **arguments[3], checkpoints=checkpoints),
        )

    cases = [
        ("params['W_b']", "nan", {**params, "W_b": _poisoned(params["W_b"], np.nan)}, initial, 1),
        ("params['V_f']", "float32", {**params, "V_f": params["V_f"].astype(np.float32)}, initial, 2),
        ("h_f0", "inf", params, {**initial, "h_f0": _poisoned(initial["h_f0"], np.inf)}, 2),
        ("h_b0", "shape", params, {**initial, "h_b0": initial["h_b0"][:, :-1]}, 2),
    ]
    for named, word, bad_params, bad_initial, count in cases:
        for call in calls(bad_params, bad_initial)[:count]:  # loss_and_grads names a nan parameter from its result
            text = _message(call)
            assert named in text and word in text, (named, text)
            assert not any(group in text for group in GROUP_WORDS), text


@pytest.mark.parametrize("checkpoints", [None, 2])
@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_data_is_refused_with_a_forward_only_modules_words(backend, checkpoints):
    """xs of another width, ys holding a label out of range, lengths of 0 or of another batch, nan in d_outputs at
    step 0: the message of elman's module (the same data: xs (T, B, d), labels ys of q classes) word for word, birnn's
    in bounded memory too."""
    birnn, elman = _modules(backend)
    params, xs, ys, _ = _problem(birnn)
    reference = module_of("elman").init_params(np.random.default_rng(0), **SIZES)
    bad_ys = ys.copy()
    bad_ys[1, 0] = SIZES["q"]
    cases = [
        (np.concatenate([xs, xs[..., :1]], axis=-1), ys, None),
        (xs, bad_ys, None),
        (xs, ys, [0, T]),
        (xs, ys, [T, T, T]),
    ]
    for bad_xs, bad_ys, lengths in cases:
        texts = []
        for module, p, bound in ((birnn, params, checkpoints), (elman, reference, None)):
            arguments = _in(module, p), _in(module, bad_xs), _in(module, bad_ys)
            call = functools.partial(module.loss_and_grads, *arguments, lengths=lengths, checkpoints=bound)
            texts.append(_message(call))
        assert texts[0] == texts[1].replace("params['U']", "params['W_f']")  # d as each model's first reader holds it
    d_outputs = np.zeros((T, B, SIZES["q"]))
    d_outputs[0, 1, 3] = np.nan  # step 0: the first of the user's steps, not of a reverse group's
    texts = []
    for module, p, bound in ((birnn, params, checkpoints), (elman, reference, None)):
        p, x = _in(module, p), _in(module, xs)
        _, cache = module.forward(p, x)
        texts.append(_message(functools.partial(module.backward, p, cache, _in(module, d_outputs), checkpoints=bound)))
    assert texts[0] == texts[1] and "(0, 1, 3)" in texts[0]


@pytest.mark.parametrize("checkpoints", [None, 2])
@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_refuses_a_corrupted_cache_in_one_line(backend, checkpoints):
    """In bounded memory too: the cache is checked once, before any group's backward in segments."""
    module, elman = _modules(backend)
    params, xs, ys, initial = _problem(module)
    params, xs, initial = _in(module, params), _in(module, xs), _in(module, initial)
    outputs, cache = module.forward(params, xs, **initial, lengths=[T, 2])
    _, unpadded = module.forward(params, xs, **initial)
    _, other = elman.forward(_in(elman, module_of("elman").init_params(np.random.default_rng(0), **SIZES)), xs)
    stacked = next(key for key in cache if key.startswith("sweep2."))
    cases = [
        ({key: value for key, value in cache.items() if key != stacked}, ("cache has keys", stacked)),
        ({**cache, stacked: cache[stacked][:, :1]}, (f"cache['{stacked}'] has shape",)),
        ({**cache, "h_b": cache["h_b"][1:]}, ("cache['h_b'] has shape", f"T+1={T + 1}")),
        (other, ("cache has keys", "'h'")),
        ((outputs, cache), ("cache must be the dict", "tuple")),
        ({**cache, "lengths": _in(module, np.array([T, 2, 1]))}, ("lengths has shape", "(B,)=(2,)")),
        ({**cache, "lengths": _in(module, np.array([0, 2]))}, ("lengths holds 0",)),
        ({**unpadded, "lengths": cache["lengths"]}, ("cache['lengths']", "another call")),
    ]
    for bad, words in cases:
        text = _message(lambda bad=bad: module.backward(params, bad, outputs, checkpoints=checkpoints))
        assert all(word in text for word in words), (words, text)
