"""What makes `bptt check`'s loss evaluations cheap gives what the module's public functions give: trusted.forward
(its maths into kept arrays, once checked against the public forward) at every call, Batched's sets of initial
states along the batch, and require_finite reading the unperturbed run freeze made."""

import dataclasses
import re
import types

import numpy as np
import pytest

from bptt.app.verify import trusted
from bptt.app.verify.batched import Batched
from bptt.app.verify.check import check
from bptt.app.verify.check_backend import Framework
from bptt.app.verify.problem import NonFiniteForward, problem
from bptt.app.verify.sets import AGREEMENT, Layout
from bptt.tests.support.modules import module_of


def moved(values, rng):
    """The dict of arrays, each entry moved by about 1%."""
    return {key: value * (1 + 0.01 * rng.standard_normal(value.shape)) for key, value in values.items()}


@pytest.mark.parametrize("name", ["elman", "elman-jordan", "lstm-layernorm"])
def test_trusted_forward_gives_the_public_forward_s_outputs_and_cache_at_every_call(name):
    """Calls of one kind with other parameters, states and data, one after the other: each gives what the public
    forward gives for its arguments, bit for bit (no call's result is an earlier call's)."""
    module, rng = module_of(name), np.random.default_rng(1)
    instance = problem(module, 6, 3, seed=0)
    for call in range(4):
        params, initial = moved(instance.params, rng), moved(instance.initial, rng)
        data = instance.data(call % 3, call % 3 + 3)  # three steps, from another start each call
        outputs, cache = trusted.forward(module, params, data, initial)
        public, public_cache = module.forward(params, *data, **initial)
        assert np.array_equal(outputs, public) and cache.keys() == public_cache.keys()
        assert all(np.array_equal(cache[key], public_cache[key]) for key in cache)


def test_groups_of_steps_run_again_only_when_their_arguments_change(monkeypatch):
    """birnn's groups (forward in time, then backward) by trusted.forward, its arrays changed in place between calls as
    a wide pass changes them: each call gives the public forward's outputs and cache bit for bit, and a group runs
    again only if its own arguments changed, bit for bit (-0.0 is not 0.0; the backward group's read the forward
    group's outputs)."""
    module, rng = module_of("birnn"), np.random.default_rng(1)
    instance = problem(module, 6, 3, seed=0)
    params, initial, data = moved(instance.params, rng), moved(instance.initial, rng), instance.data(0, 6)
    trusted.forward(module, params, data, initial)  # the first call of its kind: checked against the public forward
    ran, plain_run = [], type(module._SWEEPS).run_forward

    def spied(self, passes, *arguments):
        ran.append(passes.spec.params[0])
        return plain_run(self, passes, *arguments)

    monkeypatch.setattr(type(module._SWEEPS), "run_forward", spied)
    for changed, value, groups in [
        ("W_b", 0.5, ["W_b"]),
        (None, None, []),
        ("W_f", 0.5, ["W_f", "W_b"]),
        ("h_b0", 0.5, ["W_b"]),
        ("U_f", 0.0, ["W_f", "W_b"]),
        ("U_f", -0.0, ["W_f"]),  # its outputs those of 0.0: the backward group's arguments as they were
    ]:
        if changed is not None:
            {**params, **initial}[changed][0, 0] = value
        public = module.forward(params, *data, **initial)
        ran.clear()
        outputs, cache = trusted.forward(module, params, data, initial)
        assert ran == groups, (changed, ran)
        assert np.array_equal(outputs, public[0]) and cache.keys() == public[1].keys()
        assert all(np.array_equal(cache[key], public[1][key]) for key in cache)


def test_a_forward_that_is_not_its_passes_maths_is_always_called():
    """A module whose forward wraps the generated one (scales its outputs) has the same _PASSES: trusted.forward
    must give the wrapper's outputs at every call, never the bare maths'."""
    module = module_of("elman")
    scaled = types.ModuleType("scaled")
    scaled.__dict__.update(module.__dict__)
    scaled.forward = lambda params, xs, **initial: (2 * module.forward(params, xs, **initial)[0], {})
    instance = problem(module, 5, 3, seed=0)
    for _ in range(3):
        outputs = trusted.forward(scaled, instance.params, instance.data(0, 5), instance.initial)[0]
        assert np.array_equal(outputs, scaled.forward(instance.params, instance.xs, **instance.initial)[0])


def test_a_row_per_sample_of_a_framework_s_vectors_is_refused_naming_its_module():
    """`bptt check --backend torch|jax` runs the framework's module through check_backend.Framework, which has no
    _PASSES: Batched's try of a row per sample of its vectors is refused by a ValueError naming the module (which
    Batched takes as no), where the message's module.__name__ raised an AttributeError that ended the check (a cell
    that reduces its parameters, as a norm's mean). Any object run as a module is named: a wrapper of no name by its
    type's."""
    pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
    reference, module = module_of("lstm-layernorm"), module_of("lstm_layernorm_torch")
    instance = problem(reference, 5, 3, seed=0)
    vectors = [key for key, dims in reference.SHAPES.items() if len(dims) == 1]
    params = {**instance.params, **{key: np.repeat(instance.params[key][None], 3, axis=0) for key in vectors}}
    nameless = types.SimpleNamespace(SHAPES=reference.SHAPES)
    for runs, name in ((Framework("torch", module, reference), module.__name__), (nameless, "SimpleNamespace")):
        with pytest.raises(ValueError, match=f"^{re.escape(name)}: a row per sample of its vectors"):
            trusted.forward(runs, params, instance.data(0, 5), instance.initial)


# its parameters of the inputs' or outputs' rows (elman-jordan's outputs: the targets it is fed, set k's in its block)
WIDENED = {"lstm-layernorm": ("W_x", "V"), "elman-jordan": ("U", "R", "V", "c")}
STACKED = {"lstm-layernorm": ["W_h"], "elman-jordan": []}  # the others its maths multiply by np.matmul (one per sample)


@pytest.mark.parametrize("truncate", [None, ("chunk", 2), ("window", 2)])
@pytest.mark.parametrize("name", ["lstm-layernorm", "elman-jordan"])
def test_batched_losses_are_each_change_s_plain_loss(name, truncate):
    """Changes of entries of initial states and of vector parameters (each set's in its samples' rows), of the
    matrices of a widened dimension (each set's block), and of the other matrices that a module's maths multiply by
    np.matmul (each sample's own), more than one forward pass holds: each loss a Batched layout gives is the plain
    loss with that change alone, to AGREEMENT (a change read in another set's samples would not be)."""
    instance = problem(module_of(name), 7, 3, seed=2)
    layouts = Batched.find(instance, truncate)
    vectors = [key for key, dims in instance.module.SHAPES.items() if len(dims) == 1]
    expected = [[*instance.initial, *vectors], list(WIDENED[name]), *([STACKED[name]] if STACKED[name] else [])]
    assert Layout.find(instance, truncate) is None and len(layouts) == len(expected)
    assert layouts[0].vectors == tuple(vectors) and vectors and not layouts[0].widened
    assert [batched.varies(instance) for batched in layouts] == expected
    rng = np.random.default_rng(4)
    for batched in layouts:
        changes, values, varied = [], batched.values(instance), batched.varies(instance)
        for _ in range(2 * batched.sets + 3):
            key = varied[rng.integers(len(varied))]
            index = tuple(int(rng.integers(n)) for n in values[key].shape)
            changes.append((key, index, float(values[key][index] + rng.standard_normal())))
        assert {key for key, _, _ in changes} == set(varied)
        losses = batched.losses(instance, truncate, changes)
        for (key, index, value), loss in zip(changes, losses, strict=True):
            changed = {**values, key: values[key].copy()}
            changed[key][index] = value
            plain = batched.plain(instance, changed).loss(truncate)
            assert abs(loss - plain) <= AGREEMENT * abs(plain), (key, index)


def test_a_row_per_sample_of_the_vectors_gives_each_sample_its_set_s_forward():
    """trusted.forward with lstm-layernorm's vectors given a row per sample, two sets of three samples: each set's
    outputs are the public forward's at that set's vectors; the first call (which tries the arrays) and later ones."""
    module, rng = module_of("lstm-layernorm"), np.random.default_rng(3)
    instance = problem(module, 6, 3, seed=0)
    vectors = [key for key, dims in module.SHAPES.items() if len(dims) == 1]
    data, initial = (
        (np.concatenate([instance.xs] * 2, axis=1),),
        {k: np.concatenate([v] * 2) for k, v in instance.initial.items()},
    )
    for _ in range(3):
        sets = [moved(instance.params, rng) for _ in range(2)]
        params = {**sets[0], **{key: np.repeat([each[key] for each in sets], 3, axis=0) for key in vectors}}
        outputs = trusted.forward(module, params, data, initial)[0]
        for k, each in enumerate(sets):
            plain = module.forward({**params, **{key: each[key] for key in vectors}}, instance.xs, **instance.initial)[
                0
            ]
            assert np.allclose(outputs[:, 3 * k : 3 * k + 3], plain, rtol=1e-13, atol=0)


def test_a_matrix_per_sample_gives_each_sample_its_set_s_forward():
    """trusted.forward with lstm-layernorm's W_h given one per sample (h, 4h stacked along a last axis of samples),
    two sets of three samples: each set's outputs are the public forward's at that set's W_h, up to rounding (a
    stack's matrix products round otherwise); the first call (which tries the arrays) and later ones."""
    module, rng = module_of("lstm-layernorm"), np.random.default_rng(3)
    instance = problem(module, 6, 3, seed=0)
    data, initial = (
        (np.concatenate([instance.xs] * 2, axis=1),),
        {k: np.concatenate([v] * 2) for k, v in instance.initial.items()},
    )
    for _ in range(3):
        sets = [moved(instance.params, rng) for _ in range(2)]
        params = {**sets[0], "W_h": np.moveaxis(np.repeat([each["W_h"] for each in sets], 3, axis=0), 0, -1)}
        outputs = trusted.forward(module, params, data, initial)[0]
        for k, each in enumerate(sets):
            plain = module.forward({**sets[0], "W_h": each["W_h"]}, instance.xs, **instance.initial)[0]
            assert np.allclose(outputs[:, 3 * k : 3 * k + 3], plain, rtol=1e-13, atol=0)


def test_a_module_whose_samples_meet_gets_no_batched():
    """A forward pass whose outputs are shifted by their mean over the batch mixes the samples: Batched.find
    offers nothing for it."""
    module = module_of("lstm-layernorm")
    mixing = types.ModuleType("mixing")
    mixing.__dict__.update(module.__dict__)

    def forward(params, xs, **initial):
        outputs, cache = module.forward(params, xs, **initial)
        return outputs + outputs.mean(axis=1, keepdims=True), cache

    mixing.forward = forward
    assert Batched.find(problem(module, 5, 3, seed=0)) != ()
    assert Batched.find(problem(mixing, 5, 3, seed=0)) == ()


@pytest.mark.parametrize(
    "name, wrong_name, index",
    [
        *[("lstm-layernorm", *case) for case in [("c0", (1, 2)), ("alpha_1", (5,)), ("W_x", (9, 1)), ("V", (3, 2))]],
        ("lstm-layernorm", "W_h", (7, 2)),
        ("elman-jordan", "R", (2, 3)),
    ],
)
def test_a_wrong_gradient_is_caught_in_batched_sets(name, wrong_name, index):
    """lstm-layernorm's dL/dc0 (an initial state), dL/dalpha_1 (a norm's gain, a vector given a row per sample),
    dL/dW_x or dL/dV (a matrix of the inputs' or outputs' rows, each set's block read by its own samples), dL/dW_h
    (a matrix given one per sample), or elman-jordan's dL/dR (a matrix of the rows of the targets it is fed) off by
    one part in a million in one entry, differenced in Batched's sets: that array FAILs, every other passes."""
    module = module_of(name)
    instance = problem(module, 5, 3, seed=0)
    assert any(wrong_name in batched.varies(instance) for batched in Batched.find(instance))
    wrong = types.ModuleType("wrong")
    wrong.__dict__.update(module.__dict__)

    def loss_and_grads(*args, **kwargs):
        loss, grads = module.loss_and_grads(*args, **kwargs)
        grads[wrong_name] = grads[wrong_name].copy()
        grads[wrong_name][index] *= 1 + 1e-6
        return loss, grads

    wrong.loss_and_grads = loss_and_grads
    rows = check(wrong, 5, 3, seed=0, max_entries=64)
    assert {row.name: row.ok for row in rows} == {key: key != wrong_name for key in [*module.PARAMS, *module.STATES]}


def test_require_finite_says_what_a_fresh_forward_pass_says():
    """linear at T=2000 overflows in float64 for some seeds: the message read from freeze's run is the one a
    forward pass made for require_finite gives."""
    module = module_of("linear")
    for seed in range(8):
        instance = problem(module, 2000, 3, seed)
        messages = []
        for each in (instance, dataclasses.replace(instance, unperturbed=None)):
            with np.errstate(over="ignore", invalid="ignore"), pytest.raises(NonFiniteForward) as caught:
                each.require_finite("float64")
                raise NonFiniteForward("finite")
            messages.append(str(caught.value))
        assert messages[0] == messages[1]
        if messages[0] != "finite":
            return
    raise AssertionError("no seed of 8 overflows in float64")


@pytest.mark.parametrize("name", ["elman", "lstm-layernorm"])
def test_ladders_in_step_give_what_each_ladder_gives_alone(name):
    """differences in step (Layout's or Batched's sets, each round's last pass filled with the ladders' later
    differences) against Ridders' method entry by entry on plain forward passes: the same derivatives, to 1e-6 of
    each (or of 1e-3 of its array's largest), both with small error estimates (the wide passes round otherwise)."""
    from bptt.app.verify.check import differences
    from bptt.app.verify.ridders import ridders

    instance = problem(module_of(name), 5, 3, seed=1)
    arrays = {**instance.params, **instance.initial}
    requests = [(key, index, 0.0) for key in arrays for index in list(np.ndindex(arrays[key].shape))[:5]]
    in_step = np.array(differences(instance, None, requests))
    alone = np.array([ridders(lambda: instance.loss(), arrays[key], index) for key, index, _ in requests])
    names = np.array([key for key, _, _ in requests])
    largest = {key: np.abs(alone[names == key, 0]).max() for key in arrays}
    scale = np.maximum(np.abs(alone[:, 0]), [1e-3 * largest[key] for key in names])
    assert np.all(np.abs(in_step[:, 0] - alone[:, 0]) <= 1e-6 * scale), names[
        np.abs(in_step[:, 0] - alone[:, 0]) > 1e-6 * scale
    ]
    assert np.all(in_step[:, 1] <= 1e-6 * scale) and np.all(alone[:, 1] <= 1e-6 * scale)
