"""Final states of a padded batch (lengths=): forward's cache holds each sequence's states at its own last step at
step T (carried past it), so a long stream continues from them in the next call, as from torch.nn.LSTM's h_n: the
continued call equals each stream run unsplit, alone, in NumPy, torch and JAX.

A reverse-time state's final value is at its sequence's first step, and its initial value enters after the
stream's last step: the call that continues a stream runs its forward states from the first call's finals and its
reverse states from the stream's initial values; the first call run again with its reverse states from the
continued call's finals (at its first step) then equals the unsplit stream too, as torch.nn.RNN(bidirectional=True)
run over a stream in chunks would need (its forward states read no reverse value: birnn's)."""

from importlib.util import find_spec

import numpy as np
import pytest

from bptt.derive.direction import reverse_states
from bptt.derive.models import load
from bptt.tests.oracle.test_oracle import random_problem
from bptt.tests.support.modules import module_of
from bptt.tests.support.padded import InNumPy, _close, lengths_drawn
from bptt.tests.support.zoo import supporting

T, B = 5, 3
BACKENDS = [
    "numpy",
    pytest.param("torch", marks=pytest.mark.skipif(not find_spec("torch"), reason="no torch")),
    pytest.param("jax", marks=pytest.mark.skipif(not find_spec("jax"), reason="no jax")),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", supporting("streams"))
def test_a_stream_continued_from_the_final_states_is_the_unsplit_run(name, backend):
    model = load(name)
    module = InNumPy(module_of(name.replace("-", "_") + ("" if backend == "numpy" else f"_{backend}")))
    params, xs, ys, initial = random_problem(model, seed=len(name), steps=2 * T, batch=B)
    lengths = lengths_drawn(np.random.default_rng(len(name)), T, B)
    states = {f"{seq.name}0": initial[seq.name] for seq in model.states}
    _, cache = module.forward(params, xs[:T], ys[:T], **states, lengths=lengths)
    reverse = {f"{seq.name}0" for seq in reverse_states(model)}
    final = {key: states[key] if key in reverse else cache[key.removesuffix("0")][T] for key in module.STATES}
    continued, after = module.forward(params, xs[T:], ys[T:], **final)
    before = {**states, **{key: after[key.removesuffix("0")][T] for key in reverse}}  # at its first step
    again, _ = module.forward(params, xs[:T], ys[:T], **before, lengths=lengths) if reverse else (None, None)
    for b, length in enumerate(lengths):
        steps = np.r_[0:length, T : 2 * T]  # sequence b's own steps of the first call, then the second call's
        alone = {key: value[b : b + 1] for key, value in states.items()}
        unsplit, _ = module.forward(params, xs[steps, b : b + 1], ys[steps, b : b + 1], **alone)
        _close(f"sequence {b} (length {length}): continued outputs", continued[:, b], unsplit[length:, 0])
        if reverse:
            _close(f"sequence {b} (length {length}): first call again", again[:length, b], unsplit[:length, 0])
