"""The NumPy peers `bptt bench` times the generated module against.

naive: BPTT one step at a time, for any model, evaluated from the derivation's own expressions
(codegen/backends.py's step_printer: NumPy's printer at one step): every assignment, adjoint and
parameter-gradient term at each step t, fresh arrays everywhere. A second implementation that shares nothing
with the generated module's schedule, so the bench also checks the one against the other.
hand: the Elman RNNs written by hand for speed, as an expert would: input projections, outputs
and parameter gradients as single GEMMs over all steps, a loop over the recursion only, in
buffers kept between calls.
A peer is a callable made once per problem: run() -> (loss, {key: gradient}).
"""

import numpy as np

from bptt.codegen.backends import helpers_scope, step_printer
from bptt.derive.bptt import NEXT, derive
from bptt.derive.nodes import SoftmaxCrossEntropy


class Naive:
    """Per-step BPTT for any model, from the derivation (see the module docstring)."""

    def __init__(self, model):
        loss = model.concrete_loss()
        derivation = derive(model, named="all", loss=loss)
        step = step_printer(stacked=False)
        code = lambda expr: compile(str(step(expr)), "<naive>", "eval")  # noqa: E731
        self.model = model
        self.forced = {seq.name: code(value) for seq, value in model.teacher_forcing}
        self.steps = [(seq.name, code(rhs)) for seq, rhs in model.steps + model.outputs if seq not in model.forced]
        self.output = model.outputs[0][0].name
        self.output_adjoint = code(derivation.output_adjoints[model.outputs[0][0]])
        contributions = {**derivation.states, **derivation.intermediates}
        order = [seq for seq, _ in reversed(model.steps) if seq in contributions]
        self.adjoints = [
            (
                seq.name,
                [code(c.value) for c in contributions[seq] if c.when != NEXT],
                [code(c.value) for c in contributions[seq] if c.when == NEXT],
            )
            for seq in order
        ]
        self.params = [
            (p.name, [_gradient_term(step, term) for term in _terms(derivation.param_gradient(p).body)])
            for p in model.params
        ]
        self.initial = [(f"{seq.name}0", code(derivation.initial(seq))) for seq in model.states]
        self.losses = compile(str(step_printer(stacked=True)(loss)), "<naive loss>", "eval")
        self.mean = model.mean
        self.helpers = sorted(step.used.helpers | {"_logsumexp", "_softmax", "_onehot"})

    def __call__(self, params, xs, ys, initial):
        """(loss, gradients) of the batch-averaged loss."""
        model = self.model
        T, B = xs.shape[0], xs.shape[1]
        dtype = next(iter(params.values())).dtype
        scope = helpers_scope(self.helpers, {"np": np, "dtype": dtype, "B": B, "T": T, **params}, np.ones(B, dtype))
        sizes = {str(s): _size(model, params, s) for s in model.sizes}
        scope.update({f"n_{name}": n for name, n in sizes.items()})
        scope[model.inputs[0].name] = xs
        scope[model.concrete_loss().target.name] = ys
        for seq, _ in model.steps + model.outputs:
            scope[seq.name] = np.zeros((T + 1, B, _rows(model, seq, sizes)), dtype)
        for seq in model.states:
            scope[seq.name][0] = initial.get(f"{seq.name}0", 0)
        scope[self.output] = np.zeros((T, B, _rows(model, model.outputs[0][0], sizes)), dtype)
        for k in range(1, T + 1):
            scope["t"] = k
            for name, value in self.forced.items():
                scope[name][k] = eval(value, scope)
            for name, value in self.steps:
                scope[name][k if name != self.output else k - 1] = eval(value, scope)
        loss = eval(self.losses, {**scope, self.output: scope[self.output]}).sum() / (B * (T if self.mean else 1))
        return loss, self.backward(scope, T, B)

    def backward(self, scope, T, B):
        outputs = scope[self.output]
        scope[f"d_{self.output}"] = d_out = np.zeros_like(outputs)
        for k in range(1, T + 1):
            scope["t"] = k
            d_out[k - 1] = eval(self.output_adjoint, scope) / B
        for name, _, _ in self.adjoints:
            scope[f"d_{name}"] = np.zeros_like(scope[name])
        grads = {name: 0 for name, _ in self.params}
        for k in range(T, 0, -1):
            scope["t"] = k
            for name, same, nxt in self.adjoints:
                value = sum(eval(c, scope) for c in same + (nxt if k < T else []))
                scope[f"d_{name}"][k] = value
            for name, terms in self.params:
                grads[name] = grads[name] + sum(eval(term, scope) for term in terms)
        scope["t"] = 0
        grads = {name: np.asarray(value).reshape(scope[name].shape) for name, value in grads.items()}
        grads.update({key: eval(value, scope) for key, value in self.initial})
        return grads


def _terms(body):
    return body.args if body.is_MatAdd else (body,)


def _gradient_term(step, term):
    """A gradient term at step t, in the stacked form that at one step sums the batch (an outer product)."""
    return compile(step.gradient_term(term), "<naive gradient>", "eval")


def _size(model, params, symbol):
    for p in model.params:
        for axis, dim in enumerate(p.shape):
            if dim == symbol:
                return params[p.name].shape[axis]
    raise ValueError(f"no parameter has the size {symbol}")


class HandElman:
    """Elman BPTT written by hand: h_t = tanh(b + U x_t + W h_{t-1}), s_t = c + V h_t, softmax
    cross-entropy; or, with one-hot inputs (elman-onehot), h_t = tanh(U[:, x_t] + W h_{t-1}), no biases."""

    def __init__(self, onehot=False):
        self.onehot = onehot
        self.key, self.buffers = None, None

    def _buffers(self, T, B, d, h, q, dtype):
        key = (T, B, d, h, q, dtype)
        if key != self.key:
            self.buffers = {
                "H": np.empty((T + 1, B, h), dtype), "S": np.empty((T, B, q), dtype),
                "dA": np.empty((T + 1, B, h), dtype), "slope": np.empty((T + 1, B, h), dtype),
                "tmp": np.empty((B, h), dtype), "WT": np.empty((h, h), dtype),
                "VT": np.empty((h, q), dtype), "ones": np.ones(T * B, dtype),
            }  # fmt: skip
            self.key = key
        return self.buffers

    def __call__(self, params, xs, ys, initial):
        U, W, V = params["U"], params["W"], params["V"]
        h, d, q = W.shape[0], U.shape[1], V.shape[0]
        T, B = xs.shape[0], xs.shape[1]
        buf = self._buffers(T, B, d, h, q, W.dtype)
        H, S, dA, slope, tmp = buf["H"], buf["S"], buf["dA"], buf["slope"], buf["tmp"]
        H[0] = initial.get("h0", initial.get("s0", 0))
        if self.onehot:
            H[1:] = U.T[xs]
        else:
            np.matmul(xs.reshape(T * B, d), U.T, out=H[1:].reshape(T * B, h))
            H[1:] += params["b"]
        np.copyto(buf["WT"], W.T)
        for k in range(1, T + 1):
            np.matmul(H[k - 1], buf["WT"], out=tmp)
            H[k] += tmp
            np.tanh(H[k], out=H[k])
        H2 = H[1:].reshape(T * B, h)
        np.copyto(buf["VT"], V.T)
        np.matmul(H2, buf["VT"], out=S.reshape(T * B, q))
        if not self.onehot:
            S += params["c"]
        S2 = S.reshape(T * B, q)
        rows = np.arange(T * B)
        labels = ys.reshape(T * B)
        S2 -= S2.max(axis=1, keepdims=True)
        picked = S2[rows, labels]
        np.exp(S2, out=S2)
        total = S2.sum(axis=1)
        loss = (np.log(total) - picked).sum() / B
        S2 /= (total * B)[:, None]
        S2[rows, labels] -= 1 / B
        # backward: dL/da_t = (1 - h_t^2) (V^T dL/ds_t + W^T dL/da_{t+1})
        np.matmul(S2, V, out=dA[1:].reshape(T * B, h))
        np.square(H[1:], out=slope[1:])
        np.subtract(1, slope[1:], out=slope[1:])
        dA[T] *= slope[T]
        for k in range(T - 1, 0, -1):
            np.matmul(dA[k + 1], W, out=tmp)
            dA[k] += tmp
            dA[k] *= slope[k]
        dA2 = dA[1:].reshape(T * B, h)
        grads = {
            "U": None if self.onehot else (xs.reshape(T * B, d).T @ dA2).T,
            "W": (H[:-1].reshape(T * B, h).T @ dA2).T,
            "V": (H2.T @ S2).T,
        }
        if self.onehot:
            grads["U"] = np.zeros((d, h), W.dtype)
            np.add.at(grads["U"], xs.reshape(T * B), dA2)
            grads["U"] = grads["U"].T
            grads["s0"] = dA[1] @ W
        else:
            grads.update(b=buf["ones"] @ dA2, c=buf["ones"] @ S2, h0=dA[1] @ W)
        return loss, grads


class GemmOnly:
    """The matrix products of HandElman and nothing else: the floor that BLAS sets (no gradients)."""

    def __init__(self, onehot=False):
        self.onehot = onehot

    def __call__(self, params, xs, ys, initial):
        U, W, V = params["U"], params["W"], params["V"]
        h, d, q = W.shape[0], U.shape[1], V.shape[0]
        T, B = xs.shape[0], xs.shape[1]
        key = (T, B, d, h, q, W.dtype)
        if getattr(self, "key", None) != key:
            self.key = key
            self.H, self.S = np.zeros((T + 1, B, h), W.dtype), np.zeros((T, B, q), W.dtype)
            self.tmp, self.WT = np.zeros((B, h), W.dtype), np.ascontiguousarray(W.T)
        H, S, tmp = self.H, self.S, self.tmp
        H2, S2 = H[1:].reshape(T * B, h), S.reshape(T * B, q)
        if not self.onehot:
            np.matmul(xs.reshape(T * B, d), U.T, out=H2)
        for k in range(1, T + 1):
            np.matmul(H[k - 1], self.WT, out=tmp)
        np.matmul(H2, V.T, out=S2)
        np.matmul(S2, V, out=H2)
        for k in range(T - 1, 0, -1):
            np.matmul(H[k + 1], W, out=tmp)
        grads = [(H[:-1].reshape(T * B, h).T @ H2).T, (H2.T @ S2).T]
        if not self.onehot:
            grads.append((xs.reshape(T * B, d).T @ H2).T)
        return None


def numpy_peers(model):
    """{name: peer} of the NumPy peers that have this model; "GEMMs only" computes no gradients."""
    peers = {"naive": Naive(model)}
    if model.name in ("elman", "elman-onehot") and isinstance(model.concrete_loss(), SoftmaxCrossEntropy):
        peers["hand"] = HandElman(onehot=model.name == "elman-onehot")
        peers["GEMMs only"] = GemmOnly(onehot=model.name == "elman-onehot")
    return peers


def _rows(model, seq, sizes):
    """How many rows a sequence has at these sizes (4*h: four times h)."""
    return int(seq.rows.subs({s: sizes[str(s)] for s in model.sizes}))
