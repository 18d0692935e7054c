"""A right-padded batch (lengths=) against each of its sequences run alone, B = 1 and T = its own length: through
the same generated module and through the oracle (tests/support/oracle.py, which shares no code with codegen).

    assert_padded_as_alone(module, model, values, lengths, truncate=None, checkpoints=None)

values: (params, xs, ys, initial) as tests/support/cell_plans.py's random_values draws them, float64; the padded
steps of xs and ys are overwritten with junk (nan, labels out of range) that must never be read."""

import numpy as np

from bptt.tests.support import oracle

TOL = 1e-12
RANDOM_SEED = 7  # random truncation's draws: the batch and each sequence alone from the same seed


def padded_values(values, lengths, labels_from):
    """values with junk at every padded step: nan inputs and targets, labels far out of range."""
    params, xs, ys, initial = values
    pad = np.arange(len(xs))[:, None] >= np.asarray(lengths)
    junked = []
    for array in (xs, ys):
        array = array.copy()
        array[pad] = -labels_from - 7 if np.issubdtype(array.dtype, np.integer) else np.nan
        junked.append(array)
    return params, *junked, initial


def lengths_drawn(rng, T, B):
    """B lengths in 1..T, one of them T and one 1 (when B > 1), in a drawn order."""
    drawn = rng.integers(1, T + 1, size=B)
    drawn[:2] = (T, 1)[: min(B, 2)]
    return rng.permutation(drawn)


def _module_states(model, initial, rows=slice(None)):
    return {f"{seq.name}0": initial[seq.name][rows] for seq in model.states}


class InNumPy:
    """A generated module (NumPy, torch or JAX) called with NumPy arrays and answering in them."""

    def __init__(self, module):
        self.module, self.STATES = module, module.STATES
        self.to, self.back = oracle._framework(module)

    def _in(self, value):
        if isinstance(value, dict):
            return {key: self._in(item) for key, item in value.items()}
        return value if value is None or np.isscalar(value) else self.to(value)

    def _out(self, value):
        if isinstance(value, dict):
            return {key: self._out(item) for key, item in value.items()}
        if isinstance(value, tuple):
            return tuple(self._out(item) for item in value)
        return np.asarray(self.back(value))

    def rng(self, truncate):
        """Random truncation's draws, from the same seed for every call (None: no random truncation)."""
        if not (truncate and truncate[0] == "random"):
            return None
        if "torch" in vars(self.module):
            return vars(self.module)["torch"].Generator().manual_seed(RANDOM_SEED)
        return np.random.default_rng(RANDOM_SEED)

    def forward(self, params, xs, ys, **named):
        data = (xs, ys) if self.module.TEACHER_FORCED else (xs,)
        named = {key: value if key == "lengths" else self._in(value) for key, value in named.items()}
        return self._out(self.module.forward(self._in(params), *map(self._in, data), **named))

    def loss_and_grads(self, params, xs, ys, truncate=None, checkpoints=None, **named):
        named = {key: value if key == "lengths" else self._in(value) for key, value in named.items()}
        loss, grads = self.module.loss_and_grads(
            self._in(params),
            self._in(xs),
            self._in(ys),
            truncate=truncate,
            rng=self.rng(truncate),
            checkpoints=checkpoints,
            **named,
        )
        return float(self._out(loss)), self._out(grads)

    def backward(self, params, cache, d_outputs, truncate, checkpoints):
        got = self.module.backward(
            self._in(params),
            self._in(cache),
            self._in(d_outputs),
            truncate=truncate,
            rng=self.rng(truncate),
            checkpoints=checkpoints,
        )
        return self._out(got)


def oracle_truncation(truncate):
    """The truncation the oracle runs each sequence alone in: random truncation's is full BPTT (outputs only)."""
    return None if truncate and truncate[0] == "random" else truncate


def oracle_alone(model, values, lengths, truncate=None):
    """The oracle's run of each sequence of the padded batch alone, as assert_padded_as_alone compares them: the
    same numbers for every backend's module (a caller may compute them once and pass them as truths)."""
    params, xs, ys, initial = padded_values(values, lengths, 10**6)
    return [
        oracle.run(
            model,
            params,
            xs[:length, b : b + 1],
            ys[:length, b : b + 1],
            {seq.name: initial[seq.name][b : b + 1] for seq in model.states},
            oracle_truncation(truncate),
        )
        for b, length in enumerate(lengths)
    ]


def assert_padded_as_alone(module, model, values, lengths, truncate=None, checkpoints=None, truths=None):
    """The padded batch's outputs, final states, loss and every gradient equal those of each sequence alone
    (module and oracle, to TOL); its padded outputs and whatever reaches its padded steps are exactly 0. truths:
    oracle_alone(model, values, lengths, truncate), when the caller has them already."""
    params, xs, ys, initial = padded_values(values, lengths, 10**6)
    module, states, B = InNumPy(module), _module_states(model, initial), len(lengths)
    outputs, cache = module.forward(params, xs, ys, **states, lengths=lengths)
    loss, grads = module.loss_and_grads(params, xs, ys, truncate, checkpoints, **states, lengths=lengths)
    expected_loss, expected = 0.0, {key: np.zeros_like(value) for key, value in grads.items()}
    oracle_mode = oracle_truncation(truncate)
    if truths is None:
        truths = oracle_alone(model, values, lengths, truncate)
    for b, length in enumerate(lengths):
        one = (slice(None, length), slice(b, b + 1))
        alone = {f"{seq.name}": initial[seq.name][b : b + 1] for seq in model.states}
        out_b, cache_b = module.forward(params, xs[one], ys[one], **_module_states(model, alone))
        loss_b, grads_b = module.loss_and_grads(params, xs[one], ys[one], truncate, **_module_states(model, alone))
        truth = truths[b]
        name = model.outputs[0][0].name
        where = f"sequence {b} (length {length} of {len(xs)})"
        _close(f"{where}: outputs (module alone)", outputs[:length, b], out_b[:, 0])
        _close(f"{where}: outputs (oracle alone)", outputs[:length, b], truth.outputs[name][:, 0])
        assert not outputs[length:, b].any(), f"{where}: outputs at padded steps are not zero"
        for key in module.STATES:
            state = key.removesuffix("0")
            _close(f"{where}: final {state}", cache[state][-1, b], cache_b[state][-1, 0])
        if oracle_mode == truncate:
            _close(f"{where}: loss (oracle alone)", loss_b, truth.loss)
            for key, value in truth.grads.items():
                _close(f"{where}: gradient {key} (oracle alone)", grads_b[key], value, relative=True)
        expected_loss += loss_b / B
        add_alone(expected, grads_b, module.STATES, b, B)
    _close("loss", loss, expected_loss)
    for key, value in expected.items():
        _close(f"gradient {key}", grads[key], value, relative=True)
    _assert_padding_unread(module, params, cache, outputs.shape, lengths, truncate, checkpoints)


def add_alone(expected, grads_b, states, b, B):
    """Add sequence b's gradients alone (B = 1) into the batch's expected ones, averaged over its B sequences: a
    parameter's summed, an initial state's (a key in states) into row b."""
    for key, value in grads_b.items():
        if key in states:
            expected[key][b] = value[0] / B
        else:
            expected[key] += value / B


def _assert_padding_unread(module, params, cache, shape, lengths, truncate, checkpoints):
    """backward of the padded cache: d_outputs at padded steps (here junk) change nothing, bit for bit, so the
    gradient reaching a padded step is exactly 0; and every gradient is finite (the nan padding was never read)."""
    d_outputs = np.random.default_rng(1).standard_normal(shape)
    pad = np.arange(shape[0])[:, None] >= np.asarray(lengths)
    clean = d_outputs.copy()
    clean[pad] = 0
    junk = d_outputs.copy()
    junk[pad] = 1e300
    got = module.backward(params, cache, junk, truncate, checkpoints)
    want = module.backward(params, cache, clean, truncate, checkpoints)
    for key, value in want.items():
        assert np.isfinite(value).all(), f"gradient {key} is not finite: a padded step was read"
        assert np.array_equal(got[key], value), f"gradient {key} depends on d_outputs at padded steps"


def _close(what, got, want, relative=False):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = np.abs(want).max(initial=0) if relative else 1.0
    error = np.abs(got - want).max(initial=0) / max(scale, np.finfo(float).tiny if relative else 1.0)
    assert error <= TOL, f"{what}: differs by {error:.3e} (tol {TOL:g}{', relative' if relative else ''})"
