"""Against the texts a student holds: an exercise on a seed model, in the text's own notation, gives the numbers
the text's own formulas give on the same instance. Each text's formulas are written here as the text prints them,
in plain SymPy matrices, and evaluated on the instance's numbers; the sheets' answers must equal them.

- d2l 9.7 (Chinese 6.6), the linear RNN: dL/do_t = (1/T) dl/do_t, dL/dh_T = W_qh^T dL/do_T, the recursion
  dL/dh_t = W_hh^T dL/dh_{t+1} + W_qh^T dL/do_t, its closed form sum_{i=t}^T (W_hh^T)^{T-i} W_qh^T dL/do_{T+t-i},
  and dL/dW_hx = sum_t dL/dh_t x_t^T, dL/dW_hh = sum_t dL/dh_t h_{t-1}^T.
- Goodfellow et al. 10.2.2, as the Chinese notes on it write it: grad_s L = o - onehot(y),
  grad_h(tau) L = V^T grad_s(tau) L, grad_h(t) L = (dh(t+1)/dh(t))^T grad_h(t+1) L + V^T grad_s(t) L with
  dh(t+1)/dh(t) = diag(1 - h(t+1)^2) W, and the rows grad_{W_i,:} L = sum_t (grad_h(t) L)_i (1 - h_i(t)^2) h(t-1).
- WildML's RNN tutorial part 3: dE_t/dV = (y_hat_t - y_t) (x) s_t, and its bptt() loop (with bptt_truncate at
  least T: full BPTT) for dL/dU and dL/dW.
"""

import sympy as sp

from bptt.derive.models import load
from bptt.derive.nodes import Softmax
from bptt.documents.exercises.solve import exercise
from bptt.tests.support.exercise_oracle import Unrolled


def _one_hot(label, rows):
    return sp.Matrix([int(r == label) for r in range(rows)])


def _by_name(worked):
    """{str(key): value} of the answers: 'Adj(h_2)', 'W', ..."""
    return {str(one.lhs): one.value for one in worked.backward + worked.gradients}


def test_d2l_linear_rnn():
    found, worked = exercise(load("linear"), 2)
    env, T = found.env, found.steps
    W_hx, W_hh, W_qh = (found.data[p] for p in found.model.params)
    h = {k: env[next(s for s in env if str(s) == f"h_{k}")] for k in range(0, T + 1)}
    x = {k: found.data[next(s for s in found.data if str(s) == f"x_{k}")] for k in range(1, T + 1)}
    o = {k: env[next(s for s in env if str(s) == f"o_{k}")] for k in range(1, T + 1)}
    y = {k: found.data[next(s for s in found.data if str(s) == f"y_{k}")] for k in range(1, T + 1)}
    d_o = {k: (o[k] - y[k]) / T for k in o}  # (1/T) dl/do_t, l the squared error
    d_h = {T: W_qh.T * d_o[T]}
    for k in range(T - 1, 0, -1):
        d_h[k] = W_hh.T * d_h[k + 1] + W_qh.T * d_o[k]
    for k in range(1, T + 1):  # the closed form, as the text prints it
        closed = sum((((W_hh.T) ** (T - i)) * W_qh.T * d_o[T + k - i] for i in range(k, T + 1)), sp.zeros(*h[1].shape))
        assert closed == d_h[k]
    answers = _by_name(worked)
    for k in range(1, T + 1):
        assert answers[f"Adj(h_{k})"] == d_h[k]
    assert answers["W_hx"] == sum((d_h[k] * x[k].T for k in range(1, T + 1)), sp.zeros(*W_hx.shape))
    assert answers["W_hh"] == sum((d_h[k] * h[k - 1].T for k in range(1, T + 1)), sp.zeros(*W_hh.shape))


def test_goodfellow_elman_as_the_notes_write_it():
    found, worked = exercise(load("elman"), 5)
    env, T, model = found.env, found.steps, found.model
    U, W, V = (found.data[p] for p in model.params[:3])
    named = {str(key): value for key, value in env.items()}
    h = {k: named[f"h_{k}"] for k in range(0, T + 1)}
    x = {k: named[f"x_{k}"] for k in range(1, T + 1)}
    o = {k: env[Softmax(next(s for s in env if str(s) == f"s_{k}"))] for k in range(1, T + 1)}
    d_s = {k: o[k] - _one_hot(named[f"y_{k}"], o[k].rows) for k in o}
    d_h = {T: V.T * d_s[T]}
    for k in range(T - 1, 0, -1):
        jacobian = sp.diag(*[1 - v**2 for v in h[k + 1]]) * W  # dh(t+1)/dh(t)
        d_h[k] = jacobian.T * d_h[k + 1] + V.T * d_s[k]
    answers = _by_name(worked)
    for k in range(1, T + 1):
        assert answers[f"Adj(h_{k})"] == d_h[k]
    for name, inputs in (("W", {k: h[k - 1] for k in x}), ("U", x)):
        rows = [
            sum((d_h[k][i] * (1 - h[k][i] ** 2) * inputs[k].T for k in range(1, T + 1)), sp.zeros(1, inputs[1].rows))
            for i in range(W.rows)
        ]
        assert answers[name] == sp.Matrix.vstack(*rows)


def test_wildml_bptt_code():
    found, worked = exercise(load("elman-onehot"), 4)
    env, T, model = found.env, found.steps, found.model
    U, W, V = (found.data[p] for p in model.params)
    named = {str(key): value for key, value in env.items()}
    s = {k: named[f"s_{k}"] for k in range(0, T + 1)}
    y_hat = {k: env[Softmax(next(z for z in env if str(z) == f"z_{k}"))] for k in range(1, T + 1)}
    delta_o = {k: y_hat[k] - _one_hot(named[f"y_{k}"], V.rows) for k in y_hat}
    dLdU, dLdV, dLdW = sp.zeros(*U.shape), sp.zeros(*V.shape), sp.zeros(*W.shape)
    for t in range(T, 0, -1):  # the tutorial's bptt(), its steps counted from 1 and s_0 the initial state
        dLdV += delta_o[t] * s[t].T  # dE_t/dV = (y_hat_t - y_t) (x) s_t
        delta_t = (V.T * delta_o[t]).multiply_elementwise(s[t].applyfunc(lambda v: 1 - v**2))
        for step in range(t, 0, -1):  # bptt_truncate >= T
            dLdW += delta_t * s[step - 1].T
            dLdU[:, named[f"x_{step}"]] += delta_t
            delta_t = (W.T * delta_t).multiply_elementwise(s[step - 1].applyfunc(lambda v: 1 - v**2))
    answers = _by_name(worked)
    assert answers["W"] == dLdW
    assert answers["U"] == dLdU
    assert Unrolled(found, [model.params[2]]).gradient(model.params[2]) == dLdV  # V is not asked: sympy.diff
