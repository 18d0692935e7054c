"""What the proofs of BPTT in bounded memory share (tests/*/test_checkpoint*.py): a small problem per model,
the comparison with full BPTT, the runs of each backend, and the schedule's optimum by brute force.

The recursion runs the same operations as full BPTT: in NumPy every adjoint, and so the initial states'
gradients, are equal bit for bit (torch's and JAX's products over all steps at once round differently for
fewer rows). A parameter's gradient is a sum over all steps, computed in full BPTT as one product over the
T*B rows and here as a product per segment, summed: equal to rounding (1e-14 relative to the gradient's
largest entry in float64, a few ulps in float32)."""

import tracemalloc

import numpy as np

from bptt.tests.support.modules import groups_of
from bptt.tests.support.zoo import supporting

SIZES = (2, 3, 4)  # distinct, in the order of a module's SIZES
STEPS, BATCH = 9, 2
TRUNCATIONS = {"full": None, "window": ("window", 3), "chunk": ("chunk", 4), "random": ("random", 0.5)}
# torch's cases: every model in full BPTT and window truncation (its two adjoint functions); chunks and random
# truncation weight the same function's flows (keep), so two models each, one with several states, one
# teacher-forced (NumPy's modules, the same statements printed, are proven in every mode).
BAD = (0, -2, 2.5, True, "lots", "12", "0KiB", "10B")  # checkpoints= that are not budgets, or hold no step
WEIGHTED = (("lstm", "chunk"), ("elman-jordan", "chunk"), ("gru", "random"), ("elman-jordan", "random"))


def budgets(module, truncate):
    """One slot (every step recomputed from the start), three (a few levels), and a byte budget of three
    stored steps and two kept states as the module sizes them for this problem; of each group of steps a model
    with reverse-time states runs (their budget is shared among them)."""
    ages = truncate[1] + 1 if truncate and truncate[0] == "window" else 1
    groups, total = groups_of(module, dict(zip(module.SIZES, SIZES, strict=True))), 0
    for passes, sizes in groups:
        state, forward_step, backward_step = passes.checkpoint_bytes(sizes, BATCH, 8, ages)
        total += 3 * (forward_step + backward_step) + 2 * state
    return (len(groups), 3 * len(groups), f"{total}B")


def cases(names):
    """(model, truncation name) pairs: every model in full BPTT and window truncation (those that truncate in
    bounded memory), WEIGHTED's besides."""
    return [(name, mode) for name in names for mode in ("full", "window") if truncated(name, mode)] + list(WEIGHTED)


def zoo_cases(modes):
    """(model, truncation name) pairs of the zoo in bounded memory: every model in full BPTT, those that truncate
    in bounded memory in the other modes."""
    return [(name, mode) for mode in modes for name in supporting("checkpoints") if truncated(name, mode)]


def truncated(name, mode):
    """Whether the zoo model runs the truncation mode in bounded memory (full BPTT: every model)."""
    return mode == "full" or name in supporting("truncated_checkpoints")


def problem(module, dtype=np.float64, steps=STEPS, batch=BATCH, seed=0):
    """(params, xs, ys, initial states) of a NumPy module, random, with initial states that are not zero."""
    rng = np.random.default_rng(seed)
    sizes = dict(zip(module.SIZES, SIZES, strict=True))
    params = module.init_params(rng, dtype, **sizes)
    xs, ys = module.random_inputs(rng, steps, batch, dtype, **sizes)
    initial = {
        key: (0.5 * rng.standard_normal((batch, sizes[size]))).astype(dtype) for key, size in module.STATES.items()
    }
    return params, xs, ys, initial


def assert_equal_gradients(expected, got, tolerance, exact=()):
    """The same keys in the same order, each gradient within tolerance of the largest entry of full BPTT's;
    those in `exact` bit for bit."""
    assert list(got) == list(expected)
    for key, value in expected.items():
        value, other = np.asarray(value), np.asarray(got[key])
        if key in exact:
            assert np.array_equal(value, other), f"{key}: the recursion is not repeated exactly"
        scale = max(float(np.abs(value).max()), 1e-300)
        assert float(np.abs(value - other).max()) <= tolerance * scale, key


def assert_same_loss(loss, other):
    assert abs(float(other) - float(loss)) <= 1e-14 * max(abs(float(loss)), 1e-300)


def numpy_run(module, values, truncate, checkpoints):
    params, xs, ys, initial = values
    rng = np.random.default_rng(7)  # the same draws of random truncation for both
    return module.loss_and_grads(params, xs, ys, **initial, truncate=truncate, rng=rng, checkpoints=checkpoints)


def torch_run(module, values, truncate, checkpoints):
    import torch

    params, xs, ys, initial = values
    tensors = {k: torch.from_numpy(v) for k, v in params.items()}
    states = {k: torch.from_numpy(v) for k, v in initial.items()}
    rng = torch.Generator().manual_seed(7)
    loss, grads = module.loss_and_grads(
        tensors,
        torch.from_numpy(xs),
        torch.from_numpy(ys),
        **states,
        truncate=truncate,
        rng=rng,
        checkpoints=checkpoints,
    )
    return float(loss), {k: v.numpy() for k, v in grads.items()}


def peak(call):
    """The most call() allocates at once, as tracemalloc sees it (NumPy's arrays, Python's objects)."""
    tracemalloc.start()
    call()
    found = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return found


def optimum(T, capacities):
    """Gruslys et al.'s programme by brute force: every split y tried, for every t and level (numpy over y)."""
    deepest = len(capacities) - 1
    t = np.arange(T + 1)
    leaf = capacities[deepest]
    count = -(-t // leaf)
    deeper = count * t - leaf * count * (count - 1) // 2  # segments of `leaf` steps, each from the start
    for level in range(deepest - 1, -1, -1):
        row = np.zeros(T + 1, dtype=np.int64)
        for n in range(1, T + 1):
            if n <= capacities[level]:
                row[n] = n
            else:
                y = np.arange(1, n)
                row[n] = (y + row[1:n] + deeper[n - 1 : 0 : -1]).min()
        deeper = row
    return int(deeper[T])


class KeptPeak:
    """The most a checkpointed call of a model with reverse-time states keeps at once, in its budget's units (slots,
    or bytes as each group's passes size a kept state and a stored step), from the schedules its groups run
    (runtime/sweep_checkpoints.py's _forward_kept and _checkpointed, watched through monkeypatch): the states every
    group's forward pass kept, held until its backward; and in a group's backward, the states it keeps and the steps
    it stores (a segment run before its backward, or advanced through). The first forward pass's chunks are left
    out, as for a forward-only module (runtime/checkpoints.py: the outputs of every step are kept anyway)."""

    def __init__(self, monkeypatch):
        from bptt.runtime import sweep_checkpoints
        from bptt.runtime.checkpoints import _sweep

        self.held, self.peak = {}, 0
        forward, backward = sweep_checkpoints._forward_kept, sweep_checkpoints._checkpointed

        def forward_kept(model, truncation, params, sizes, dtype, x, y, states, checkpoints, itemsize, parts=None):
            actions, (state, _) = self.schedule(model, truncation, sizes, x, checkpoints, itemsize)
            self.held[id(model.spec)] = state * sum(action[0] == "keep" for action in _sweep(actions))
            self.noted(0)
            return forward(model, truncation, params, sizes, dtype, x, y, states, checkpoints, itemsize, parts)

        def checkpointed(model, truncation, keep, params, sizes, dtype, x, y, states, checkpoints, itemsize, **rest):
            actions, units = self.schedule(model, truncation, sizes, x, checkpoints, itemsize)
            start = len(_sweep(actions)) if rest.get("kept") is not None else 0
            kept = {a for kind, a, *_ in actions[:start] if kind == "keep"}
            self.held.pop(id(model.spec), None)
            for action in actions[start:]:
                self.act(action, kept, units)
            return backward(model, truncation, keep, params, sizes, dtype, x, y, states, checkpoints, itemsize, **rest)

        monkeypatch.setattr(sweep_checkpoints, "_forward_kept", forward_kept)
        monkeypatch.setattr(sweep_checkpoints, "_checkpointed", checkpointed)

    @staticmethod
    def schedule(model, truncation, sizes, x, checkpoints, itemsize):
        """(the group's actions, (a kept state, a stored step) in the budget's units)."""
        from bptt.runtime.checkpoints import _checkpoint_actions

        T, B = x.shape[0], x.shape[1]
        actions = _checkpoint_actions(model, truncation, sizes, B, itemsize, checkpoints, T)
        state, forward_step, backward_step = model.checkpoint_bytes(sizes, B, itemsize, truncation.ages)
        return actions, ((1, 1) if checkpoints.bytes is None else (state, forward_step + backward_step))

    def act(self, action, kept, units):
        state, step = units
        kind, a = action[0], action[1]
        if kind == "keep":
            kept.add(a)
        elif kind == "free":
            kept.discard(a)
        stored = 0
        if kind == "advance":  # ("advance", a, b, chunk): chunks of at most chunk steps, each dropped as it ends
            stored = min(action[3], action[2] - a)
        elif kind == "backward":  # ("backward", a, b): steps a+1..b stored, then backward through them
            stored = action[2] - a
        self.noted(len(kept) * state + stored * step)

    def noted(self, own):
        self.peak = max(self.peak, own + sum(self.held.values()))
