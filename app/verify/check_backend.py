"""`bptt check --backend`: a module checked against finite differences of its own loss (check.py), and a
framework's module (torch, JAX) also against the NumPy module's loss, outputs and gradients.

check.py reads a module through NumPy arrays; Framework shows a framework's module so: NumPy arrays in,
converted to the framework's (dtype kept), and its results converted back. Its problems are drawn by the
NumPy module's init_params and random_inputs, so both modules see the same numbers. JAX runs its functions
under jax.jit (eagerly, a forward pass takes a tenth of a second), with float64 enabled.

Randomized truncation draws its keep pattern from the framework's generator, which cannot be given one:
the exact expectation over every pattern is the NumPy module's, and the framework's gradient for its own
draws equals the NumPy module's for the same uniforms (Replay)."""

from dataclasses import dataclass

import numpy as np

from bptt.app.verify import check as checking
from bptt.app.verify import patterns
from bptt.app.verify.problem import problem
from bptt.codegen.backends import BACKENDS
from bptt.runtime.options import Truncation

AGREEMENT = {"float64": 1e-12, "float32": 1e-5}  # max |framework - NumPy| / max |NumPy|


class Replay(np.random.Generator):
    """A NumPy generator whose random(n) gives the uniforms a framework's generator drew."""

    def __init__(self, uniforms):
        super().__init__(patterns.UNDRAWN)
        self.uniforms = np.asarray(uniforms, dtype=np.float64)

    def random(self, size=None, dtype=np.float64, out=None):
        return self.uniforms[:size]


class Framework:
    """A framework's generated module (torch, JAX) as check.py reads the NumPy one, through its backend's adapter
    (codegen/adapter.py): NumPy arrays in, the framework's computing (JAX's under jax.jit), NumPy arrays out."""

    def __init__(self, backend, module, reference):
        self.adapter, self.module, self.reference = BACKENDS[backend], module, reference
        for name in ("__name__", "PARAMS", "SIZES", "SHAPES", "CACHE", "STATES", "TEACHER_FORCED", "MEAN"):
            setattr(self, name, getattr(module, name))
        self.init_params, self.random_inputs = reference.init_params, reference.random_inputs
        self.adapter.load()
        self.adapter.prepare()
        jit = self.adapter.jit
        self._forward, self._losses = jit(module.forward), jit(module.losses)
        self._loss_and_grads = jit(module.loss_and_grads, static=("truncate",))

    def to(self, value):
        return self.adapter.to_framework(value)

    def back(self, value):
        return self.adapter.to_numpy(value)

    def forward(self, params, *data, **initial):
        outputs, cache = self._forward(self.to(params), *map(self.to, data), **self.to(initial))
        return self.back(outputs), self.back(cache)

    def padded(self, lengths):
        """The lengths keyword of a call: none, or lengths= in the framework's arrays."""
        return {} if lengths is None else {"lengths": self.to(lengths)}

    def losses(self, outputs, ys):
        return self.back(self._losses(self.to(outputs), self.to(ys)))

    def loss_and_grads(self, params, xs, ys, truncate=None, rng=None, lengths=None, **initial):
        loss, grads = self._loss_and_grads(
            self.to(params),
            self.to(xs),
            self.to(ys),
            **self.to(initial),
            truncate=truncate,
            rng=rng,
            **self.padded(lengths),
        )
        return float(loss), self.back(grads)

    def draws(self, seed, steps):
        """(the framework's generator seeded with seed, the steps uniforms its module draws from it)."""
        return self.adapter.draws(seed, steps)


def against_numpy(framework, instance, dtype, truncate, seed):
    """Rows of max |framework - NumPy| / max |NumPy| (tolerance AGREEMENT[dtype]) for the loss, the outputs
    and every gradient, both modules computing in dtype; random truncation with the framework's draws."""
    params, xs, ys, initial = instance.cast(dtype)
    rng, replayed = None, None
    if Truncation.of(truncate).randomized:
        rng, uniforms = framework.draws(seed, len(xs))
        replayed = (
            Replay(uniforms)
            if patterns.group_count(framework.reference) == 1
            else group_replay(framework, seed, len(xs))
        )
    reference, padded = framework.reference, {} if instance.lengths is None else {"lengths": instance.lengths}
    loss, grads = framework.loss_and_grads(params, xs, ys, truncate=truncate, rng=rng, **initial, **padded)
    expected_loss, expected = reference.loss_and_grads(
        params, xs, ys, truncate=truncate, rng=replayed, **initial, **padded
    )
    data = (xs, ys) if framework.TEACHER_FORCED else (xs,)
    outputs, expected_outputs = (
        framework.forward(params, *data, **initial, **padded)[0],
        reference.forward(params, *data, **initial, **padded)[0],
    )
    pairs = {"loss": (loss, expected_loss), "outputs": (outputs, expected_outputs)}
    pairs |= {name: (grads[name], value) for name, value in expected.items()}
    tolerance = AGREEMENT[dtype]
    rows = []
    for name, (got, want) in pairs.items():
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        scale = max(float(np.abs(want).max()), np.finfo(float).tiny)
        error = float(np.abs(got - want).max() / scale) if got.shape == want.shape else float("inf")
        rows.append(checking.Row(name, error, 0.0, tolerance, error / tolerance))
    return rows


def group_replay(framework, seed, steps):
    """A NumPy rng that gives each group of steps of a module with reverse-time states the uniforms the framework's
    module draws for it from its generator seeded with seed (the module's own group_rngs splits it)."""
    composed = framework.module._SWEEPS
    generators = composed.group_rngs(framework.draws(seed, steps)[0], len(composed.sweeps))
    return patterns.GroupGenerators(Replay(framework.adapter.uniforms(one, steps)) for one in generators)


@dataclass(frozen=True)
class Options:
    """What `bptt check` was asked for."""

    steps: int
    batch: int
    seed: int
    dtype: str
    sizes: dict
    truncate: tuple | None
    lengths: object = None  # a Lengths (--lengths), or None


def report(model, backend, module, reference, options):
    """(the lines `bptt check` prints for one backend, whether every row passed). module: the backend's
    generated module (the NumPy one for numpy); reference: the NumPy module."""
    o = options
    randomized = Truncation.of(o.truncate).randomized
    framework = None if BACKENDS[backend].reference else Framework(backend, module, reference)
    checked = reference if framework is None or randomized else framework
    rows = checking.check(checked, o.steps, o.batch, o.seed, o.dtype, o.sizes, o.truncate, lengths=o.lengths)
    shown = " ".join(f"{k}={v}" for k, v in o.sizes.items())
    mode = "full BPTT" if o.truncate is None else f"truncate={Truncation.of(o.truncate).text()}"
    which = "" if framework is None else f" ({backend} module)"
    padded = "" if o.lengths is None else f" lengths={o.lengths.text()}"
    if o.lengths is not None and o.lengths.random:  # the lengths drawn, to give as --lengths again
        drawn = problem(reference, o.steps, o.batch, o.seed, o.sizes, o.lengths).lengths
        padded += f" ({','.join(str(length) for length in drawn)})"
    lines = [f"{model.name}{which}: {mode} T={o.steps} B={o.batch}{padded} seed={o.seed} dtype={o.dtype} {shown}"]
    if randomized and framework is not None:
        count = 2 ** (o.steps * patterns.group_count(reference))
        lines.append(f"the NumPy module's expectation over all {count} keep patterns, against full BPTT:")
    lines.append(checking.table(rows, "max rel. bias", None) if randomized else checking.table(rows))
    if framework is not None:
        instance = problem(reference, o.steps, o.batch, o.seed, o.sizes, o.lengths)
        agreement = against_numpy(framework, instance, o.dtype, o.truncate, o.seed)
        draws = f", {backend}'s draws (seed {o.seed}) replayed into it" if randomized else ""
        lines.append(f"against the NumPy module{draws}:")
        lines.append(checking.table(agreement, "max rel. diff.", None, label="quantity"))
        rows = rows + agreement
    failed = [row.name for row in rows if not row.ok]
    if failed:
        lines.append(f"FAILED: {', '.join(dict.fromkeys(failed))}")
    else:
        lines.append(_verdict(backend, o.truncate, o.steps * patterns.group_count(reference)))
    return lines, not failed


def _verdict(backend, truncate, steps):  # steps: each group's T steps (G*T)
    if Truncation.of(truncate).randomized:
        verdict = f"the expectation over all {2**steps} keep patterns equals full BPTT"
    else:
        verdict = "all gradients agree with finite differences" + ("" if truncate is None else " of the truncated loss")
    if not BACKENDS[backend].reference:
        verdict += f", and the {backend} module's loss, outputs and gradients with the NumPy module's"
    return verdict
