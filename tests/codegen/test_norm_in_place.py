"""A normalised cell's NumPy loops work in place (printing/statements.py): a norm's mean, deviation and x̂, its
adjoint (the runtime's _norm_adjoint, out=) and a slice's adjoint's blocks are each written by calls into arrays that
exist, never computed as a new array and copied in; a reduction of parameters, once per call (NumPy's and torch's)."""

import re

import pytest

from bptt.codegen.backends import BACKENDS
from bptt.tests.support import norm_cells
from bptt.tests.support.modules import module_of

ITEM_ASSIGNED = re.compile(r"\] \+?= ")  # `x[...] = expr`, `d_a_t[..., :n_h] = expr`, `x[...] += expr`


def loop_lines(source, function):
    """The lines of the `for t in range(...)` loop of the module's function."""
    body = source.split(f"\ndef {function}(", 1)[1].split("\ndef ", 1)[0]
    loop = body.split("    for t in range(", 1)[1]
    return [line for line in loop.splitlines()[1:] if line.startswith("        ")]


def test_the_layernorm_lstms_numpy_loops_assign_no_new_array():
    source = open(module_of("lstm-layernorm").__file__, encoding="utf-8").read()
    for function in ("_forward", "_adjoints"):
        lines = loop_lines(source, function)
        assert lines, function
        assert not [line for line in lines if ITEM_ASSIGNED.search(line)], function
    adjoints = loop_lines(source, "_adjoints")
    assert sum("_norm_adjoint(" in line and "out=" in line for line in adjoints) == 2  # c's and W_h h's norms


def test_the_layernorm_lstms_numpy_norms_take_each_mean_in_one_product_and_centre_once():
    """Each of the forward loop's two norms (of W_h h_{t-1} and of c_t) takes its two means (mu, and the mean of the
    squares in sigma) as one np.dot with a vector of 1/n each, subtracts its mean once (into x̂'s array, then divided
    by sigma in place) and takes sigma's square root by np.sqrt: no reduction over the last axis and scaling, no
    power. The input's norm, for all steps before the loop, likewise."""
    source = open(module_of("lstm-layernorm").__file__, encoding="utf-8").read()
    loop = "\n".join(loop_lines(source, "_forward"))
    forward = source.split("\ndef _forward(", 1)[1].split("\ndef ", 1)[0]
    assert "np.add.reduce" not in forward and "np.power" not in forward
    assert loop.count("np.dot(") == 4 and loop.count("np.sqrt(") == 2
    assert re.findall(r"np\.subtract\((\w+), mu_\w+, out=(\w+)\)", loop) == [
        ("a1_in_t", "a1_in_hat_t"),
        ("c_t", "c_hat_t"),
    ]
    before = forward.split("    for t in range(", 1)[0]
    assert before.count("np.dot(") == 2 and before.count("np.subtract(") == 1


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_reduction_of_parameters_is_computed_once_per_call(backend):
    """mean(g) and sum(g) of a parameter g (and mean(b * b)) are values of no step and no sample: each in-place function
    that reads one computes it once, before its loops, into an array of one entry, which broadcasts where its
    statements read it; never reduced into a scratch array of the steps' samples (_all_1, _step_1), whose out=
    NumPy's np.dot refused and torch resized."""
    source = BACKENDS[backend].module_source(norm_cells.reduced_params())
    assert "_all_1" not in source and "_step_1" not in source
    for function, names in (("_forward", ("_mean_of_g", "_sum_of_g", "_mean_of_1")), ("_adjoints", ("_sum_of_g",))):
        body = source.split(f"\ndef {function}(", 1)[1].split("\ndef ", 1)[0]
        for name in names:
            written = [line for line in body.splitlines() if re.search(rf"np\.copyto\({name}, |{name}\.copy_\(", line)]
            assert len(written) == 1 and body.index(written[0]) < body.index("for t in range("), (function, name)
            assert f'"{name}": ("1",)' in source
