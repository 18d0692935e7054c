"""The JAX backend (generated/<model>_jax.py) for every zoo model: its gradients against the NumPy module's
and against jax.grad of its own plain forward, full BPTT and every truncation, in float64 to 1e-12; float32
against float64; the custom_vjp function under jit, vmap and grad; regeneration; bad input.

Compile time dominates: each model compiles loss_and_grads once per truncation mode and dtype, and one
jitted gradient of a vmapped loss per kind (apply, plain forward), on tiny sizes."""

import pytest

pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import contextlib
import functools
import importlib
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from bptt.app.verify.check import load_module
from bptt.codegen.backends import BACKENDS
from bptt.derive.models import load
from bptt.tests.support.jax_eager import on_device
from bptt.tests.support.modules import cache_steps
from bptt.tests.support.zoo import supporting

jax.config.update("jax_enable_x64", True)

NAMES = supporting("truncate", "apply")
GENERATED = pathlib.Path(__file__).parents[2] / "generated"
T, B = 5, 3
# test_seam.py calls the same zoo modules on arrays of the same shapes (T, B and sizes 2, 3, 4) in the same
# truncations: in one work unit (tests/conftest.py), each jitted function is compiled once for both files.
XDIST_GROUP = "zoo modules at T=5, B=3"
MODES = (None, ("window", 2), ("chunk", 2), ("random", 0.5))


class Draws(np.random.Generator):
    """A NumPy generator whose random(n) gives prescribed numbers: the uniforms the JAX module draws
    from its key (jax.random.uniform(key, (T,)) in float64), so both modules keep the same steps."""

    def __init__(self, uniforms):
        super().__init__(np.random.PCG64(0))
        self.uniforms = uniforms

    def random(self, n):
        return self.uniforms[:n]


def modules(name):
    base = name.replace("-", "_")
    return importlib.import_module(f"bptt.generated.{base}"), importlib.import_module(f"bptt.generated.{base}_jax")


def relative(a, b):
    """max |a - b| / max |b| (0 when both are zero)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.abs(b).max()
    return np.abs(a - b).max() / scale if scale else np.abs(a).max()


def assert_close(got, expected, tol, what):
    assert set(got) == set(expected), f"{what}: keys {sorted(got)} != {sorted(expected)}"
    errors = {key: relative(got[key], expected[key]) for key in expected}
    worst = max(errors, key=errors.get)
    assert errors[worst] <= tol, f"{what}: {worst} differs by {errors[worst]:.2e} relative"


def to_jax(tree, dtype=None):
    return {k: on_device(v if dtype is None or v.dtype.kind != "f" else v.astype(dtype)) for k, v in tree.items()}


@functools.cache
def case(name):
    """The NumPy and JAX modules, a float64 problem (NumPy arrays) with non-zero initial states, and the
    NumPy module's loss and gradients in every truncation mode (random: the JAX key's draws)."""
    numpy_module, jax_module = modules(name)
    rng = np.random.default_rng(7)
    sizes = {size: 2 + k for k, size in enumerate(numpy_module.SIZES)}
    params = numpy_module.init_params(rng, **sizes)
    xs, ys = numpy_module.random_inputs(rng, T, B, **sizes)
    initial = {key: 0.5 * rng.standard_normal((B, sizes[size])) for key, size in numpy_module.STATES.items()}
    key = jax.random.key(3)
    expected = {}
    for mode in MODES:
        with drawing_as_jax(numpy_module, key) as draws:
            truncated = dict(truncate=mode, rng=draws if mode and mode[0] == "random" else None)
            expected[mode] = numpy_module.loss_and_grads(params, xs, ys, **initial, **truncated)
    return numpy_module, jax_module, (params, xs, ys, initial), key, expected


def uniforms(key):
    return np.asarray(jax.random.uniform(key, (T,), dtype=jnp.float64))


@contextlib.contextmanager
def drawing_as_jax(numpy_module, key):
    """A NumPy generator drawing the JAX module's uniforms from key; for a model with reverse-time states, each
    group of steps given the uniforms of its own key, as runtime/jax_sweeps.py's group_rngs splits it."""
    sweeps = getattr(numpy_module, "_SWEEPS", None)
    if sweeps is None:
        yield Draws(uniforms(key))
        return
    groups = [Draws(uniforms(part)) for part in jax.random.split(key, len(sweeps.sweeps))]
    object.__setattr__(sweeps, "group_rngs", lambda rng, count: groups)  # over the class's method (a frozen class)
    try:
        yield Draws(uniforms(key))
    finally:
        object.__delattr__(sweeps, "group_rngs")


def jax_loss_and_grads(name, mode, dtype=jnp.float64):
    _, module, (params, xs, ys, initial), key, _ = case(name)
    return module.loss_and_grads(
        to_jax(params, dtype),
        on_device(xs if xs.dtype.kind != "f" else xs.astype(dtype)),
        on_device(ys if ys.dtype.kind != "f" else ys.astype(dtype)),
        **to_jax(initial, dtype),
        truncate=mode,
        rng=key if mode and mode[0] == "random" else None,
    )


@pytest.mark.parametrize("name", NAMES)
def test_gradients_equal_numpy_in_every_mode(name):
    """float64: the loss and every gradient equal the NumPy module's to 1e-12, full BPTT and each
    truncation; a truncated gradient differs from the full one wherever the model has a recursion."""
    numpy_module, module, _, _, expected = case(name)
    for mode in MODES:
        loss, grads = jax_loss_and_grads(name, mode)
        assert abs(float(loss) - expected[mode][0]) <= 1e-12 * abs(expected[mode][0]), (name, mode)
        assert all(g.dtype == jnp.float64 for g in grads.values())
        assert_close(grads, expected[mode][1], 1e-12, f"{name} {mode}")
    recurrent = name != "jordan"  # jordan's steps decouple under teacher forcing: nothing to truncate
    for mode in MODES[1:]:
        changed = max(relative(expected[mode][1][k], expected[None][1][k]) for k in expected[None][1])
        assert (changed > 1e-3) == recurrent, (name, mode, changed)


@pytest.mark.parametrize("name", NAMES)
def test_float32_agrees_with_float64(name):
    """float32 in, float32 out, equal to the float64 gradients to float32 precision."""
    loss64, grads64 = jax_loss_and_grads(name, None)
    loss32, grads32 = jax_loss_and_grads(name, None, jnp.float32)
    assert all(g.dtype == jnp.float32 for g in grads32.values())
    assert abs(float(loss32) - float(loss64)) <= 1e-5 * abs(float(loss64))
    assert_close(grads32, grads64, 1e-4, f"{name} float32")


def sequences(name, count=2):
    """count independent problems stacked on a leading axis of sequences (N, T, B, ...), as JAX arrays,
    and the NumPy module's summed gradients over them."""
    numpy_module, _, (params, _, _, _), _, _ = case(name)
    rng = np.random.default_rng(11)
    sizes = {size: 2 + k for k, size in enumerate(numpy_module.SIZES)}  # case's (a dim may read 4*h)
    xs, ys, initial, each = [], [], [], []
    for _ in range(count):
        x, y = numpy_module.random_inputs(rng, T, B, **sizes)
        start = {key: 0.5 * rng.standard_normal((B, sizes[size])) for key, size in numpy_module.STATES.items()}
        each.append(numpy_module.loss_and_grads(params, x, y, **start)[1])
        xs.append(x), ys.append(y), initial.append(start)
    expected = {k: sum(g[k] for g in each) for k in params}  # the parameters' gradients add up
    expected.update({k: np.stack([g[k] for g in each]) for k in numpy_module.STATES})  # each sequence its own
    stacked = {key: on_device(np.stack([s[key] for s in initial])) for key in initial[0]}
    return on_device(np.stack(xs)), on_device(np.stack(ys)), stacked, expected


def batch_loss(module, run):
    """The summed batch-averaged loss of N sequences, run(params, x, y, initial) giving one's outputs."""

    def loss(params, xs, ys, initial):
        outputs = jax.vmap(run, in_axes=(None, 0, 0, 0))(params, xs, ys, initial)
        count = outputs.shape[2] * (outputs.shape[1] if module.MEAN else 1)
        return jax.vmap(module.losses)(outputs, ys).sum() / count

    return loss


@pytest.mark.parametrize("name", NAMES)
def test_custom_vjp_under_jit_vmap_and_grad(name):
    """jax.jit(jax.grad) of a loss through apply (the derived BPTT), vmapped over two sequences, equals the
    same through the plain forward (JAX's own autodiff of the scan) and the NumPy module's summed gradients."""
    _, module, (params, _, _, _), _, _ = case(name)
    xs, ys, initial, expected = sequences(name)
    ys_in = module.TEACHER_FORCED != ()

    def through_apply(p, x, y, start):
        return module.apply(p, x, *([y] if ys_in else []), **start)

    def through_forward(p, x, y, start):
        return module.forward(p, x, *([y] if ys_in else []), **start)[0]

    def both(p, x, y, start):  # one compiled function for both gradients
        by_apply = jax.grad(batch_loss(module, through_apply), argnums=(0, 3))(p, x, y, start)
        by_forward = jax.grad(batch_loss(module, through_forward), argnums=(0, 3))(p, x, y, start)
        return by_apply, by_forward

    results = jax.jit(both)(to_jax(params), xs, ys, initial)
    grads = {
        label: {**by_param, **by_state}
        for label, (by_param, by_state) in zip(("apply", "forward"), results, strict=True)
    }
    assert_close(grads["apply"], grads["forward"], 1e-12, f"{name} apply vs jax.grad of forward")
    assert_close(grads["apply"], expected, 1e-12, f"{name} apply vs NumPy")


@pytest.mark.parametrize("mode", [("window", 2), ("random", 0.5)])
def test_custom_vjp_truncated(mode, name="lstm"):
    """apply's backward truncates as asked: jax.grad of the loss through apply equals the NumPy module's
    truncated gradients (random: the same key's draws)."""
    _, module, (params, xs, ys, initial), key, expected = case(name)

    def loss(p, start):
        outputs = module.apply(p, on_device(xs), **start, truncate=mode, rng=key)
        return module.losses(outputs, on_device(ys)).sum() / B

    by_param, by_state = jax.grad(loss, argnums=(0, 1))(to_jax(params), to_jax(initial))
    assert_close({**by_param, **by_state}, expected[mode][1], 1e-12, f"{name} {mode} through apply")


def test_loss_and_grads_under_user_jit():
    """loss_and_grads inside the user's jax.jit (truncate static), traced and closed-over concrete arrays
    mixed, gives what it gives outside."""
    _, module, (params, xs, ys, initial), _, expected = case("elman")
    data = on_device(xs), on_device(ys)  # closed over: concrete arrays inside the trace

    @functools.partial(jax.jit, static_argnames="truncate")
    def jitted(params, initial, truncate):
        return module.loss_and_grads(params, *data, **initial, truncate=truncate)

    loss, grads = jitted(to_jax(params), to_jax(initial), truncate=("chunk", 2))
    assert abs(float(loss) - expected[("chunk", 2)][0]) <= 1e-12 * abs(expected[("chunk", 2)][0])
    assert_close(grads, expected[("chunk", 2)][1], 1e-12, "elman under jit")


def test_backward_takes_any_output_gradient():
    """backward(params, cache, d_outputs) for a d_outputs that is not a loss's: the NumPy module's answer."""
    numpy_module, module, (params, xs, ys, initial), _, _ = case("gru")
    _, cache = numpy_module.forward(params, xs, **initial)
    d_outputs = np.random.default_rng(5).standard_normal((T, B, params["V"].shape[0]))
    expected = numpy_module.backward(params, cache, d_outputs, truncate=("window", 3))
    _, jax_cache = module.forward(to_jax(params), on_device(xs), **to_jax(initial))
    assert module.CACHE["h"][0] == "T+1" and module.CACHE["r"][0] == "T"  # a state's initial step, a gate's steps
    assert_close(to_jax(cache_steps(cache, module, numpy_module)), jax_cache, 1e-12, "gru cache")
    grads = module.backward(to_jax(params), jax_cache, on_device(d_outputs), truncate=("window", 3))
    assert_close(grads, expected, 1e-12, "gru backward, window 3")


def test_regeneration_is_byte_identical():
    """What `bptt codegen --check --backend jax` checks, in this process: each module as rendered now."""
    for name in NAMES:
        path = GENERATED / BACKENDS["jax"].filename(name)
        assert BACKENDS["jax"].module_source(load(name)) == path.read_text(encoding="utf-8"), f"{path} is stale"


def test_import_leaves_x64_alone():
    """Importing a module leaves jax_enable_x64 off; asking for float64 then says how to turn it on."""
    code = (
        "import jax, bptt.generated.lstm_jax as m\n"
        "print(jax.config.jax_enable_x64, m.init_params(jax.random.key(0), d=2, h=3, q=2)['V'].dtype)\n"
        "m.init_params(jax.random.key(0), jax.numpy.float64, d=2, h=3, q=2)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["False", "float32"], result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        'ValueError: dtype float64 needs jax.config.update("jax_enable_x64", True) first'
    )


def bad_calls(numpy_module, module, params, xs, ys, initial):
    """(what is wrong, NumPy call, JAX call): each must raise the same one-line ValueError."""
    nan_xs = xs.copy()
    nan_xs[1, 0, 0] = np.nan
    wide = dict(params, U=np.zeros((params["U"].shape[0], params["U"].shape[1] + 1)))
    bad_ys = ys.copy()
    bad_ys[2, 1] = 99
    return [
        (
            "nan in xs",
            lambda: numpy_module.loss_and_grads(params, nan_xs, ys),
            lambda: module.loss_and_grads(to_jax(params), on_device(nan_xs), on_device(ys)),
        ),
        (
            "a parameter's shape",
            lambda: numpy_module.loss_and_grads(wide, xs, ys),
            lambda: module.loss_and_grads(to_jax(wide), on_device(xs), on_device(ys)),
        ),
        (
            "a label out of range",
            lambda: numpy_module.loss_and_grads(params, xs, bad_ys),
            lambda: module.loss_and_grads(to_jax(params), on_device(xs), on_device(bad_ys)),
        ),
        (
            "truncate",
            lambda: numpy_module.loss_and_grads(params, xs, ys, truncate=("window", 0)),
            lambda: module.loss_and_grads(to_jax(params), on_device(xs), on_device(ys), truncate=("window", 0)),
        ),
        (
            "h0's batch",
            lambda: numpy_module.loss_and_grads(params, xs, ys, h0=initial["h0"][:1]),
            lambda: module.loss_and_grads(
                to_jax(params), on_device(xs), on_device(ys), h0=on_device(initial["h0"][:1])
            ),
        ),
    ]


def test_bad_input_raises_the_numpy_modules_errors():
    numpy_module, module, (params, xs, ys, initial), _, _ = case("elman")
    for what, numpy_call, jax_call in bad_calls(numpy_module, module, params, xs, ys, initial):
        with pytest.raises(ValueError) as expected:
            numpy_call()
        with pytest.raises(ValueError) as got:
            jax_call()
        assert str(got.value) == str(expected.value), what
        assert "\n" not in str(got.value)


def test_bad_input_of_jax_kinds():
    _, module, (params, xs, ys, _), _, _ = case("lstm")
    with pytest.raises(ValueError, match="needs rng=jax.random.key"):
        module.loss_and_grads(to_jax(params), on_device(xs), on_device(ys), truncate=("random", 0.5))
    with pytest.raises(ValueError, match=r"xs must be a JAX array, got ndarray"):
        module.forward(to_jax(params), xs)


def test_clip_grads_and_checks_under_jit():
    """clip_grads rescales to the global norm g_max (and refuses g_max <= 0 as NumPy does); under jax.jit a
    wrong shape still raises the NumPy module's error, when the function is traced."""
    numpy_module, module, (params, xs, ys, _), _, expected = case("elman")
    grads = to_jax(expected[None][1])
    norm = np.sqrt(sum(float(jnp.sum(g**2)) for g in grads.values()))
    clipped = module.clip_grads(grads, 0.5 * norm)
    assert abs(np.sqrt(sum(float(jnp.sum(g**2)) for g in clipped.values())) - 0.5 * norm) <= 1e-12 * norm
    assert_close(clipped, {k: 0.5 * v for k, v in expected[None][1].items()}, 1e-12, "clipped")
    with pytest.raises(ValueError) as numpy_error:
        numpy_module.clip_grads(expected[None][1], 0)
    with pytest.raises(ValueError) as jax_error:
        module.clip_grads(grads, 0)
    assert str(jax_error.value) == str(numpy_error.value)
    with pytest.raises(ValueError) as numpy_error:
        numpy_module.forward(params, xs[:, :, :1])
    with pytest.raises(ValueError) as jax_error:
        jax.jit(module.forward)(to_jax(params), on_device(xs[:, :, :1]))
    assert str(jax_error.value) == str(numpy_error.value)


@functools.cache
def users_lstm():
    """The NumPy and JAX modules of a user's cell (examples/torch_lstm.py: torch's stacked W_ih, read by
    slices), rendered in memory."""
    model = load(str(GENERATED.parent / "examples" / "torch_lstm.py") + ":lstm")
    return load_module(model, from_zoo=False), load_module(model, from_zoo=False, backend="jax")


def test_a_users_cell_with_sliced_weights():
    """A user's cell with stacked weights generates a JAX module whose gradients are the NumPy module's."""
    numpy_module, jax_module = users_lstm()
    rng = np.random.default_rng(2)
    sizes = {size: 2 + k for k, size in enumerate(numpy_module.SIZES)}
    params = numpy_module.init_params(rng, **sizes)
    xs, ys = numpy_module.random_inputs(rng, T, B, **sizes)
    expected_loss, expected = numpy_module.loss_and_grads(params, xs, ys)
    loss, grads = jax_module.loss_and_grads(to_jax(params), on_device(xs), on_device(ys))
    assert abs(float(loss) - expected_loss) <= 1e-12 * abs(expected_loss)
    assert_close(grads, expected, 1e-12, "a user's torch-style LSTM")


def test_stacked_weights_are_built_and_checked():
    """init_params builds the stacked weights (4h rows), and a stacked weight of the wrong height is refused
    with the NumPy module's one-line message."""
    numpy_module, jax_module = users_lstm()
    sizes = {"d": 2, "h": 3, "q": 4}
    params = jax_module.init_params(jax.random.key(0), jnp.float64, **sizes)
    expected = numpy_module.init_params(np.random.default_rng(0), **sizes)
    assert {k: v.shape for k, v in params.items()} == {k: v.shape for k, v in expected.items()}
    xs, ys = numpy_module.random_inputs(np.random.default_rng(1), T, B, **sizes)
    expected["W_ih"] = expected["W_ih"][:11]
    with pytest.raises(ValueError) as numpy_error:
        numpy_module.loss_and_grads(expected, xs, ys)
    params["W_ih"] = params["W_ih"][:11]
    with pytest.raises(ValueError) as jax_error:
        jax_module.loss_and_grads(params, on_device(xs), on_device(ys))
    assert "W_ih" in str(numpy_error.value) and str(jax_error.value) == str(numpy_error.value)


def test_apply_gives_the_inputs_a_zero_gradient():
    """As apply's docstring says: the derived BPTT gives xs a zero cotangent (not its true gradient, which
    jax.grad of the plain forward pass gives)."""
    numpy_module, module = modules("elman")
    sizes = {size: 2 + k for k, size in enumerate(numpy_module.SIZES)}
    params = module.init_params(jax.random.key(0), jnp.float64, **sizes)
    xs, _ = module.random_inputs(jax.random.key(1), T, B, jnp.float64, **sizes)
    through_apply = jax.grad(lambda x: module.apply(params, x).sum())(xs)
    through_forward = jax.grad(lambda x: module.forward(params, x)[0].sum())(xs)
    assert not jnp.any(through_apply) and jnp.any(through_forward)
