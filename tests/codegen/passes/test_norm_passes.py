"""The passes that make a layer norm cheaper per step, on the LayerNorm-LSTM's Program (Ba et al., the zoo's
lstm-layernorm): its centred vector computed once (NumPy's centred_norms), and the biases of its hoisted sum
(b + beta_1 + beta_2) added once per call (hoisted_terms)."""

import pathlib

import sympy as sp

from bptt.codegen.ir import Assign, the_loop
from bptt.codegen.passes.hoist import hoisted_terms
from bptt.codegen.passes.norms import centred_norms
from bptt.codegen.program import NUMPY_PASSES, rewritten, shared
from bptt.derive.models import load
from bptt.derive.nodes import SeqAt
from bptt.tests.support.passes import before, in_loop, outside_loop

XDIST_GROUP = "passes"  # one worker derives each cell once for every pass's test
EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples" / "layer_norm_cells.py"
NORMS = {"a1_in": True, "a2_in": False, "c": True}  # each normalised vector of the cell: whether in the loop


def statements_of(a_pass, name):
    """The forward statements that assign the sequence `name`, in order, in the loop or before it."""
    return [s for s in outside_loop(a_pass) + in_loop(a_pass) if isinstance(s, Assign) and s.target.name == name]


def test_centred_norms_computes_each_norms_centre_once_into_its_x_hat():
    """x̂_t's array first holds v_t − 1 μ_t; σ_t is the mean of its squares; x̂_t is then divided by σ_t in place.
    v_t − 1 μ_t is written once per norm where the derivation's statements write it twice."""
    model = load("lstm-layernorm")
    start = _before_centred(model)
    done = centred_norms(start)
    for v, looped in NORMS.items():
        (mu,) = statements_of(done.forward, f"mu_{v}")
        centre = statements_of(start.forward, f"{v}_hat")[0].value.args[0]
        assert centre.has(mu.target)  # v − 1 μ, as the derivation writes it
        first, last = statements_of(done.forward, f"{v}_hat")
        (sigma,) = statements_of(done.forward, f"sigma_{v}")
        hat = first.target
        assert first.value == centre
        assert sigma.value.has(sp.HadamardPower(hat, 2)) and not sigma.value.has(centre)
        assert set(last.value.args) >= {hat} and not last.value.has(centre) and last.value.has(sigma.target)
        order = [s.target for s in (outside_loop(done.forward) if not looped else in_loop(done.forward))]
        assert order.index(hat) < order.index(sigma.target) < len(order) - order[::-1].index(hat) - 1
        written = [s for s in outside_loop(done.forward) + in_loop(done.forward) if s.value.has(centre)]
        assert written == [first]
        assert sum(s.value.has(centre) for s in outside_loop(start.forward) + in_loop(start.forward)) == 2
    assert done.adjoints == start.adjoints and done.cache == start.cache


def test_centred_norms_keeps_an_rms_norm_which_has_no_centre():
    """An RMS norm's σ reads v itself (examples/layer_norm_cells.py's GRU): nothing to compute once, the Program is
    kept as it is; the Elman cell's layer norm beside it is rewritten."""
    for cell, rewritten_ in (("gru_rmsnorm", False), ("elman_layernorm", True)):
        start = _before_centred(load(f"{EXAMPLES}:{cell}"))
        assert (centred_norms(start) != start) is rewritten_, cell


def _before_centred(model):
    return rewritten(shared(model), NUMPY_PASSES[: NUMPY_PASSES.index(centred_norms)])


def test_hoisted_terms_adds_a_norms_biases_once_per_call():
    """Ba et al.'s a_t = b + (alpha_1 x̂1_t + beta_1) + (alpha_2 x̂2_t + beta_2): every bias reads nothing of the
    loop, so all three leave it (the norms' gain * x̂ + bias nest in the sum), summed once per call into one vector
    that the hoisted statement adds to every step; the loop adds alpha_1 x̂1_t only."""
    model = load("lstm-layernorm")
    start = before(model, hoisted_terms)
    done = hoisted_terms(start)
    params = {p.name: p for p in model.params}
    (stack,) = [s for s in done.forward.stacks if s not in start.forward.stacks]
    assert stack.parts == (params["b"] + params["beta_1"] + params["beta_2"],)
    (hoisted,) = [s for s in outside_loop(done.forward) if s.target.name == "a"]
    summed = sp.MatrixSymbol(stack.name, *params["b"].shape)
    assert summed in sp.Add.make_args(hoisted.value) or summed in hoisted.value.args
    assert not hoisted.value.has(params["b"]) and not hoisted.value.has(params["beta_1"])
    (step,) = [s for s in in_loop(done.forward) if s.target.name == "a"]
    assert not step.value.has(params["beta_1"]) and step.value.has(params["alpha_1"])
    assert step.value.has(SeqAt) and the_loop(done.forward.statements) is not None
