"""The JAX backward scan's step (codegen/jax/statements.py) on a small loop, run: a group of adjoints side by
side (what stacked_window's flows and gradients read) holds its members' final values at each step, also when
a member is assigned and then added to by its flow from t+1 (a state read by another in its own step)."""

import pytest

pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from bptt.codegen.ir import Array, Assign, Flow, Loop, Steps
from bptt.codegen.jax.printer import JaxPrinter
from bptt.codegen.jax.statements import backward_scan
from bptt.derive.nodes import Adj, SeqAt, t

jax.config.update("jax_enable_x64", True)

h = sp.Symbol("h")
M = sp.MatrixSymbol("M", h, h)
W_c, W_g = (sp.MatrixSymbol(name, 2 * h, h) for name in ("W_c", "W_g"))


def sequence(name, rows=h):
    return SeqAt(name, t, rows, "intermediate")


def scanned(loop, group, namespace):
    """The step's scan printed for loop and run in namespace (full BPTT: no ages, keep ones); its outputs."""
    printer = JaxPrinter(stacked=True, arrays={})
    built = backward_scan(printer, loop, {"d_c", "d_g", group.name}, [], {"g"}, {}, [group])
    lines = built.scan.lines("one step", ["zero"], reverse=True, last="carry")
    helpers = {"_fresh": lambda x, ages: x, "_flow": lambda x, keep, ages: x, "_total": lambda x, ages: x}
    scope = {"jax": jax, "jnp": jnp, "ages": None, **helpers, **namespace}
    exec("\n".join(lines), scope)  # noqa: S102 - the code the printer wrote for this loop
    return {name: np.asarray(scope[name]) for name, _ in built.scan.outputs}


def test_a_group_joins_its_members_after_their_last_write_in_the_step():
    """dL/dg_t = local_t + W_g^T [dL/dc; dL/dg]_{t+1}; dL/dc_t = M^T dL/dg_t + W_c^T [dL/dc; dL/dg]_{t+1}:
    the group [dL/dc; dL/dg]_t the scan carries and returns has dL/dc_t with its flow (2833396 joined it
    before the flow)."""
    loop = Loop(
        (
            Flow(Adj(sequence("g")), W_g.T * Adj(sequence("_c_g", 2 * h).subs(t, t + 1)), "g's flow"),
            Assign(Adj(sequence("c")), M.T * Adj(sequence("g")), "c read by g in its step"),
            Flow(Adj(sequence("c")), W_c.T * Adj(sequence("_c_g", 2 * h).subs(t, t + 1)), "c's flow"),
        ),
        backward=True,
    )
    group = Array("_d_c_g", 2 * h, Steps.FROM_ZERO, (("d_c", h), ("d_g", h)))
    steps, batch, rows = 3, 2, 3
    rng = np.random.default_rng(0)
    values = {"M": rng.standard_normal((rows, rows))}
    values |= {name: rng.standard_normal((2 * rows, rows)) for name in ("W_c", "W_g")}
    local = rng.standard_normal((steps + 1, batch, rows))
    namespace = values | {"d_g": local, "keep_next": np.ones(steps), "zero": np.zeros((batch, 2 * rows))}
    got = scanned(loop, group, namespace)
    after = np.zeros((batch, 2 * rows))
    expected = np.zeros((steps, batch, 2 * rows))
    for step in reversed(range(steps)):
        d_g = local[step + 1] + after @ values["W_g"]
        d_c = d_g @ values["M"] + after @ values["W_c"]
        after = expected[step] = np.concatenate((d_c, d_g), axis=-1)
    np.testing.assert_allclose(got["_d_c_g"], expected, rtol=1e-13)
    np.testing.assert_allclose(got["d_c"], expected[..., :rows], rtol=1e-13)
