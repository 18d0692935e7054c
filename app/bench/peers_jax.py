"""JAX peers for `bptt bench`: the same models as the PyTorch peers, as a jax.lax.scan over the
steps inside jax.jit(jax.value_and_grad(...)), gate weights stacked inside the compiled function.
Present only where jax is installed; XLA on one thread (bench sets XLA_FLAGS before importing it)."""

import importlib.util

import numpy as np

from bptt.app.bench.peers_torch import EPS, GATES, supports  # noqa: F401 (the same models as the PyTorch peers)


def available():
    return importlib.util.find_spec("jax") is not None


def prepare(model, params, xs, ys, initial):
    """(run, collect) as for the PyTorch peers; run() waits for the result."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    B = xs.shape[1]
    h = params["V"].shape[1]  # every model's head s_t = V h_t
    dtype = next(iter(params.values())).dtype
    keys = [f"{seq.name}0" for seq in model.states]
    start = {k: jnp.asarray(initial.get(k, np.zeros((B, h), dtype))) for k in keys}
    if model.name == "lstm-layernorm":
        loss = _layernorm_lstm(jax, jnp, B)
    else:
        loss = (_gated if model.name in GATES else _elman)(model.name, jax, jnp, B)
    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    args = ({k: jnp.asarray(v) for k, v in params.items()}, start, jnp.asarray(xs), jnp.asarray(ys))

    def run():
        return jax.block_until_ready(step(*args))

    def collect(result):
        value, (grads, initial_grads) = result
        out = {k: np.asarray(v) for k, v in grads.items()}
        out.update({k: np.asarray(v) for k, v in initial_grads.items()})
        return float(value), out

    return run, collect


def _elman(name, jax, jnp, B):
    onehot = name == "elman-onehot"
    key = "s0" if onehot else "h0"

    def loss(p, start, xs, ys):
        inputs = p["U"].T[xs] if onehot else xs @ p["U"].T + p["b"]

        def step(h, a):
            h = jnp.tanh(a + h @ p["W"].T)
            return h, h

        _, H = jax.lax.scan(step, start[key], inputs)
        S = H @ p["V"].T + (0 if onehot else p["c"])
        logp = jax.nn.log_softmax(S, axis=-1)
        return -jnp.take_along_axis(logp, ys[..., None], axis=-1).sum() / B

    return loss


def _gated(name, jax, jnp, B):
    gates = GATES[name]
    sigmoid = jax.nn.sigmoid

    def loss(p, start, xs, ys):
        W_i = jnp.concatenate([p[f"W_i{g}"] for g in gates])
        W_h = jnp.concatenate([p[f"W_h{g}"] for g in gates])
        b_i = jnp.concatenate([p[f"b_i{g}"] for g in gates])
        b_h = jnp.concatenate([p[f"b_h{g}"] for g in gates])
        inputs = xs @ W_i.T + b_i

        def gru(h, a):
            hh = h @ W_h.T + b_h
            ar, az, an = jnp.split(a, 3, axis=-1)
            hr, hz, hn = jnp.split(hh, 3, axis=-1)
            r, z = sigmoid(ar + hr), sigmoid(az + hz)
            n = jnp.tanh(an + r * hn)
            h = (1 - z) * n + z * h
            return h, h

        def lstm(carry, a):
            c, h = carry
            i, f, g, o = jnp.split(a + h @ W_h.T + b_h, 4, axis=-1)
            c = sigmoid(f) * c + sigmoid(i) * jnp.tanh(g)
            h = sigmoid(o) * jnp.tanh(c)
            return (c, h), h

        if name == "gru":
            _, H = jax.lax.scan(gru, start["h0"], inputs)
        else:
            _, H = jax.lax.scan(lstm, (start["c0"], start["h0"]), inputs)
        return 0.5 * jnp.square(H @ p["V"].T - ys).sum() / B

    return loss


def _layernorm_lstm(jax, jnp, B):
    """Ba et al.'s equations 20-22 (gates f, i, o, g; torch's epsilon), the input's norm for all steps at once."""
    sigmoid = jax.nn.sigmoid

    def norm(z, p, k):
        centred = z - z.mean(-1, keepdims=True)
        return (
            p[f"alpha_{k}"] * centred * jax.lax.rsqrt(jnp.square(centred).mean(-1, keepdims=True) + EPS)
            + p[f"beta_{k}"]
        )

    def loss(p, start, xs, ys):
        inputs = norm(xs @ p["W_x"].T, p, 2) + p["b"]

        def step(carry, a):
            c, h = carry
            f, i, o, g = jnp.split(norm(h @ p["W_h"].T, p, 1) + a, 4, axis=-1)
            c = sigmoid(f) * c + sigmoid(i) * jnp.tanh(g)
            h = sigmoid(o) * jnp.tanh(norm(c, p, 3))
            return (c, h), h

        _, H = jax.lax.scan(step, (start["c0"], start["h0"]), inputs)
        return 0.5 * jnp.square(H @ p["V"].T - ys).sum() / B

    return loss
