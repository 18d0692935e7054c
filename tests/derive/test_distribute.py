"""derive/distribute.py: a product by a sum of matrices becomes the sum of the products by its terms (what codegen
derives), the identity drops out, a matrix of ones stays; a vector sum stays whole; the transpose of a sum is the sum
of the transposes."""

import sympy as sp

from bptt.derive.distribute import coded_factor, distributed
from bptt.derive.model import matrix, sequence, sizes
from bptt.derive.nodes import t, tanh

d, h = sizes("d h")
W, U = matrix("W", h, h), matrix("U", h, d)
x, hidden = sequence("x", d, "input"), sequence("h", h, "state")


def test_a_product_by_a_damped_antisymmetric_weight_is_three_products():
    damped = (W - W.T - sp.Identity(h) / 4) * hidden(t - 1)
    assert distributed(damped) == W * hidden(t - 1) - W.T * hidden(t - 1) - hidden(t - 1) / 4


def test_a_chain_of_sums_is_distributed_inside_a_function():
    inner = tanh((W + W.T) * (W - sp.OneMatrix(h, h)) * hidden(t - 1))
    want = W * W * hidden(t - 1) - W * sp.OneMatrix(h, h) * hidden(t - 1) + W.T * W * hidden(t - 1)
    want = want - W.T * sp.OneMatrix(h, h) * hidden(t - 1)
    assert distributed(inner) == tanh(want)


def test_a_sum_of_vectors_stays_whole_and_the_transpose_of_a_sum_is_a_sum():
    assert distributed(W * (hidden(t - 1) + U * x())) == W * (hidden(t - 1) + U * x())
    assert distributed(sp.Transpose(W - W.T) * hidden(t - 1)) == W.T * hidden(t - 1) - W * hidden(t - 1)


def test_the_factors_the_code_multiplies_by():
    assert all(coded_factor(f) for f in (W, W.T, W[:h, :], sp.Identity(h), sp.OneMatrix(h, h), W - W.T, W * W.T))
    assert not any(coded_factor(f) for f in (W[:h, :].T, W**2, sp.Inverse(W), hidden(t - 1)))
    assert coded_factor(W + W.T, before_label=True) and not coded_factor(W[:h, :], before_label=True)
