"""The runtime (runtime/): real modules, imported and run here directly: a model's facts come in as a _Spec,
its passes as its _Passes, so one runtime serves every generated module without mixing two
models' facts, and it imports nothing of bptt but itself (no sympy when a generated module imports it)."""

import subprocess
import sys

import numpy as np
import pytest

from bptt.runtime import checkpoints, checks, common, numpy_passes
from bptt.runtime import numpy as runtime
from bptt.runtime.options import Truncation
from bptt.tests.support.modules import module_of

SPEC = common._Spec(
    params=("W", "U", "b"),
    sizes=("d", "h"),
    shapes={"W": ("4*h", "d"), "U": ("4*h", "h"), "b": ("4*h",)},
    states={"h0": "h"},
    cache={"x": ("T", "B", "d"), "h": ("T+1", "B", "h")},
)


def params(h=3, d=2, dtype=np.float64):
    return {"W": np.ones((4 * h, d), dtype), "U": np.ones((4 * h, h), dtype), "b": np.ones(4 * h, dtype)}


def test_truncation_arguments_parse_to_a_mode_and_a_value():
    assert Truncation.of(None) == ("full", None)
    assert Truncation.of(("chunk", np.int64(3))) == ("chunk", 3)
    assert Truncation.of(("random", 1)) == ("random", 1.0)
    for bad in (("window", 0), ("chunk", True), ("random", 0), ("random", 1.5), ("every", 2), ["chunk", 2]):
        with pytest.raises(ValueError, match="truncate"):
            Truncation.of(bad)
    with pytest.raises(ValueError, match="needs rng=np.random.default_rng"):
        runtime._truncation(("random", 0.5), None)
    assert runtime._truncation(("random", 0.5), np.random.default_rng(0)) == ("random", 0.5)


def test_the_parameters_bind_the_sizes_of_their_spec():
    assert common._param_sizes(SPEC, params(h=3, d=2)) == {"h": 3, "d": 2}
    assert common._extent("4*h", {"h": 3}) == 12
    with pytest.raises(ValueError, match=r"params\['U'\] has shape \(12, 5\); expected \(4\*h=12, h=3\)"):
        common._param_sizes(SPEC, dict(params(), U=np.ones((12, 5))))
    with pytest.raises(ValueError, match="sizes must be exactly d, h; missing \\['h'\\]"):
        common._check_sizes(SPEC, {"d": 2})
    with pytest.raises(ValueError, match="params is missing b"):
        checks._check_param_keys(SPEC, {"W": 0, "U": 0})


def test_two_models_with_parameters_of_the_same_shapes_keep_their_own_sizes():
    """Bindings are kept per spec: one runtime serves every module, and (3, 2) binds h, d differently."""
    first = common._Spec(("W",), ("d", "h"), {"W": ("h", "d")}, {}, {})
    second = common._Spec(("W",), ("d", "h"), {"W": ("d", "h")}, {}, {})
    W = {"W": np.ones((3, 2))}
    assert common._param_sizes(first, W) == {"h": 3, "d": 2}
    assert common._param_sizes(second, W) == {"d": 3, "h": 2}


def test_the_numpy_checks_name_what_is_wrong():
    sizes, dtype = runtime._check_params(SPEC, params())
    assert sizes == {"h": 3, "d": 2} and dtype == np.float64
    with pytest.raises(ValueError, match=r"params\['b'\] has dtype float32; expected float64 like the parameters"):
        runtime._check_params(SPEC, dict(params(), b=np.ones(12, np.float32)))
    bad = params()
    bad["U"][1, 2] = np.nan
    with pytest.raises(ValueError, match=r"params\['U'\] holds nan at index \(1, 2\)"):
        runtime._check_params(SPEC, bad)
    assert runtime._check_params(SPEC, bad, finite=False)[0] == {"h": 3, "d": 2}
    with pytest.raises(ValueError, match="cache has keys 'x'; expected the keys x, h"):
        checks._check_cache_keys(SPEC, {"x": np.ones((2, 1, 2))})
    z = np.linspace(-8.0, 8.0, 17)
    out = np.empty_like(z)
    assert runtime._sigmoid(z, out=out) is out  # as (1 + tanh(z / 2)) / 2: absolute error ~ eps
    assert np.allclose(out, 1 / (1 + np.exp(-z)), rtol=1e-14, atol=1e-16)
    grads = {"W": np.full((2, 3), 2.0), "b": np.full(3, 2.0)}  # global norm 2 sqrt(9) = 6
    assert all(np.allclose(runtime.clip_grads(grads, 3.0)[key], grads[key] / 2) for key in grads)


def test_each_module_keeps_its_own_workspace():
    """Two modules' array makers of one name (_forward_arrays) never share arrays; free_workspace frees both."""

    def maker(rows):
        def _forward_arrays(T, B, sizes, dtype):
            return {"h": np.zeros((T, B, rows), dtype)}

        return _forward_arrays

    first, second = maker(2), maker(5)
    one = numpy_passes._workspace(SPEC, first, 4, 1, {"d": 2, "h": 3}, np.float64)
    other = numpy_passes._workspace(SPEC, second, 4, 1, {"d": 2, "h": 3}, np.float64)
    assert one["h"].shape == (4, 1, 2) and other["h"].shape == (4, 1, 5)
    assert numpy_passes._workspace(SPEC, first, 4, 1, {"d": 2, "h": 3}, np.float64) is one  # kept
    assert numpy_passes._workspace(SPEC, first, 5, 1, {"d": 2, "h": 3}, np.float64) is not one  # replaced
    numpy_passes.free_workspace()
    assert numpy_passes._workspace(SPEC, second, 4, 1, {"d": 2, "h": 3}, np.float64) is not other


@pytest.mark.parametrize("truncate", [None, ("chunk", 2), ("window", 2)])
def test_the_checkpoint_driver_runs_a_models_segments(truncate):
    """_checkpointed, called directly with a module's _Passes, gives full BPTT's loss and gradients."""
    module = module_of("linear")
    rng = np.random.default_rng(1)
    sizes = {"d": 2, "h": 3, "q": 2}
    theta = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, 9, 2, **sizes)
    loss, expected = module.loss_and_grads(theta, xs, ys, truncate=truncate)
    truncation = Truncation.of(truncate)
    keep = runtime._keep_weights(truncation, 9, None, np.float64) if truncation.weighted else None
    got_loss, got = checkpoints._checkpointed(
        module._PASSES, truncation, keep, theta, dict(sizes, T=9, B=2), np.float64, xs, ys, (None,), 4, 8
    )
    assert np.isclose(got_loss, loss, rtol=1e-14)
    assert all(np.allclose(got[key], expected[key], rtol=1e-12, atol=1e-14) for key in expected)
    summed = checkpoints._summed(SPEC, {"W": 1, "h0": 1}, {"W": 2, "h0": 5}, first=False)
    assert summed == {"W": 3, "h0": 1}  # an initial state's gradient comes from the first segment only


def test_a_generated_module_imports_the_runtime_and_no_sympy():
    code = (
        "import sys, bptt.generated.linear as m\n"
        "assert 'sympy' not in sys.modules and 'jinja2' not in sys.modules, 'heavy'\n"
        "assert m.clip_grads.__module__ == 'bptt.runtime.numpy', m.clip_grads.__module__\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dims_are_sums_of_multiples_of_sizes():
    assert common._extent("q + 6*h", {"q": 2, "h": 3}) == 20
    assert common._extent("T+1", {"T": 4}) == 5 and common._extent("T*B", {"T": 4, "B": 3}) == 12
    assert common._extent("0", {}) == 0


def test_work_arrays_come_from_their_tables():
    """A module's tables of dims make its arrays: steps 0..T zero at step 0 in the forward pass, views of a
    stacked array share its memory, ones start as ones; a step's bytes are its rows times B times the itemsize."""
    passes = numpy_passes._Passes(
        SPEC,
        *[None] * 5,
        forward_work={"_i_f": ("T+1", "B", "2*h"), "_step": ("B", "h")},
        backward_work={"_ones": ("T*B",)},
        views={"i": ("_i_f", "0", "h"), "f": ("_i_f", "h", "2*h")},
        ones=("_ones",),
        step_rows=("h", "d + 2*h", "h", "2*h"),
    )
    work = passes.forward_arrays(4, 2, {"d": 2, "h": 3}, np.float32)
    assert work["_i_f"].shape == (5, 2, 6) and work["_step"].shape == (2, 3) and work["_i_f"].dtype == np.float32
    assert not work["_i_f"][0].any() and work["f"].shape == (5, 2, 3)
    work["f"][1] = 7
    assert (work["_i_f"][1, :, 3:] == 7).all() and not (work["i"][1] == 7).any()
    assert (passes.backward_arrays(4, 2, {"d": 2, "h": 3}, np.float64)["_ones"] == 1).all()
    assert passes.checkpoint_bytes({"d": 2, "h": 3}, 2, 8, 1) == (48, 128, 48)
    assert passes.checkpoint_bytes({"d": 2, "h": 3}, 2, 8, 3) == (48, 128, 48 + 3 * 96)


def test_work_arrays_of_a_passing_table_are_its_own():
    """Tables made afresh for each call (the check's, with an axis of one after the batch's), each dropped after its
    call, give their own shapes: remembered shapes are never another table's that had the same id."""
    passes = numpy_passes._Passes(SPEC, *[None] * 5, forward_work={}, backward_work={})
    sizes = {"d": 2, "h": 3}
    for count in range(1, 40):
        dims = ("T", "B", *["1"] * (count % 3), "h")
        work = passes.arrays({"_a": dims}, 4, 2, sizes, np.float64)  # the table is dropped when the call returns
        assert work["_a"].shape == (4, 2, *[1] * (count % 3), 3), count


def test_a_standalone_module_has_no_public_options():
    """The runtime reads its options' private names; the public ones (Truncation, ...) are aliases a standalone
    module, carrying what it reads, does not carry."""
    from bptt.codegen.printing.helpers import helpers

    chosen = {d.name for d in helpers("numpy").closure(["_Passes", "_truncation"])}
    assert {"_Truncation", "_Checkpoints", "_WINDOW"} <= chosen
    assert not chosen & {"Truncation", "Checkpoints", "FULL", "WINDOW", "CHUNK", "RANDOM", "SHELLS"}


def test_numpys_sigmoid_keeps_its_relative_accuracy_where_it_is_tiny():
    """log(sigmoid(z)) reads sigmoid's relative digits: (1 + tanh(z / 2)) / 2 lost them below 0 (a random cell's
    log(sigmoid) output 2.5e-11 off) and gave 0, so log gave -inf, below -37. In place (out=z) as well."""
    import mpmath

    from bptt.runtime.numpy import _sigmoid

    z = np.array([-700.0, -100.0, -40.0, -20.0, -3.0, -1e-9, 0.0, 1e-9, 3.0, 20.0, 40.0, 700.0])
    exact = np.array([float(1 / (1 + mpmath.exp(-mpmath.mpf(v)))) for v in z])
    got = _sigmoid(z)
    assert np.all(np.abs(got - exact) <= 4 * np.finfo(float).eps * exact)
    inplace = z.copy()
    assert _sigmoid(inplace, out=inplace) is inplace and np.array_equal(inplace, got)


@pytest.mark.parametrize("centred", [True, False])
def test_numpys_norm_adjoint_writes_into_out_what_the_projection_gives(centred):
    """_norm_adjoint(g, x̂, σ, out=) is (1/σ)(I − (1/n)11ᵀ − (1/n)x̂x̂ᵀ) g, the n x n projection applied row by row
    (without 11ᵀ for an RMS norm), written into out and returned as out, g left as it was; and the same without out."""
    rng = np.random.default_rng(3)
    g, hat = rng.standard_normal((2, 4, 5))
    sigma = 1 + rng.random((4, 1))
    n = g.shape[-1]
    expected = np.stack(
        [
            (np.eye(n) - np.outer(h, h) / n - (np.ones((n, n)) / n if centred else 0)) @ row / s
            for row, h, s in zip(g, hat, sigma[:, 0], strict=True)
        ]
    )
    kept, out = g.copy(), np.full_like(g, np.nan)
    assert runtime._norm_adjoint(g, hat, sigma, centred, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(g, kept)
    np.testing.assert_allclose(runtime._norm_adjoint(g, hat, sigma, centred), expected, rtol=1e-13, atol=1e-14)


def test_numpys_unit_means_are_one_over_n_for_each_size_and_dtype_and_read_only():
    """_norm_adjoint's means are products with _unit_means(n, dtype), made once per size and dtype (cached): each
    call gets the vector of its own size and dtype, never one made for another, and none can be written."""
    from bptt.runtime.numpy import _unit_means

    for n, dtype in ((3, np.float64), (4, np.float32), (3, np.float32), (4, np.float64), (3, np.float64)):
        means = _unit_means(n, np.dtype(dtype))
        assert means.shape == (n,) and means.dtype == dtype and not means.flags.writeable
        assert np.array_equal(means, np.full(n, 1 / n, dtype))
    assert _unit_means(5, np.dtype(np.float64)) is _unit_means(5, np.dtype(np.float64))
