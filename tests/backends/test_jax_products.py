"""The JAX module's compiled program against jax.grad of a scan of the same cell (app/bench/peers_jax.py): no
more matrix products per step, counted in XLA's compiled HLO (the dot operations a while loop's body runs, in
it and in the computations it calls). A structural count, the same on every run: the gates' flows in the
backward scan are one product with the stacked weights (stacked_window in codegen/passes/fuse_backward.py), as jax.grad
transposes the forward pass's one product."""

import pytest

pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import re

import jax
import jax.numpy as jnp

from bptt.app.bench import peers_jax
from bptt.codegen.backends import BACKENDS
from bptt.derive.models import load

jax.config.update("jax_enable_x64", True)

T, B, SIZES = 50, 16, {"d": 8, "h": 16, "q": 4}
HEADER = re.compile(r"^(?:ENTRY )?(%[\w.\-]+) .*\{$")
CALLED = re.compile(r"(?:calls|to_apply|body|condition)=(%[\w.\-]+)")


def computations(text):
    """{name: its instruction lines} of an HLO module's text."""
    out, current = {}, None
    for line in text.splitlines():
        header = HEADER.match(line)
        if header:
            current = out.setdefault(header.group(1), [])
        elif current is not None and line.strip() not in ("", "}"):
            current.append(line)
    return out


def products_per_step(text):
    """The dot operations the while loops' bodies run per iteration, summed over the loops."""
    found = computations(text)
    count = 0
    for body in re.findall(r" while\(.*?body=(%[\w.\-]+)", text):
        seen, todo = set(), [body]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += [called for line in found[name] for called in CALLED.findall(line)]
        count += sum(" dot(" in line for name in seen for line in found[name])
    return count


def compiled(function, *args):
    return jax.jit(function).lower(*args).compile().as_text()


@pytest.mark.parametrize("name", ["gru", "lstm"])
def test_the_module_runs_no_more_products_per_step_than_jax_grad_of_a_scan(name):
    module = __import__(f"bptt.generated.{name}{BACKENDS['jax'].suffix}", fromlist=["_"])
    params = module.init_params(jax.random.key(0), jnp.float32, **SIZES)
    xs, ys = module.random_inputs(jax.random.key(1), T, B, jnp.float32, **SIZES)
    start = {f"{seq.name}0": jnp.zeros((B, SIZES["h"]), jnp.float32) for seq in load(name).states}
    ours = products_per_step(compiled(lambda p, x, y, s: module.loss_and_grads(p, x, y, **s), params, xs, ys, start))
    loss = peers_jax._gated(name, jax, jnp, B)
    theirs = products_per_step(compiled(jax.value_and_grad(loss, argnums=(0, 1)), params, start, xs, ys))
    assert 2 <= ours <= theirs, (ours, theirs)  # forward and backward: at least one product a step each


def plain_products(text):
    """The matrix products the compiled program runs outside every loop on XLA's plain dot with an operand
    transposed (contracted over its rows), not on the fast GEMM its CPU backend calls in a fusion."""
    (entry,) = re.findall(r"^ENTRY (%[\w.\-]+) ", text, re.MULTILINE)
    return [line for line in computations(text)[entry] if " dot(" in line and "lhs_contracting_dims={0}" in line]


@pytest.mark.parametrize("name", ["gru", "lstm"])
def test_the_weight_gradients_run_on_the_fast_gemm(name):
    """The gradients summed over steps and samples are contractions over both axes (a stacked weight's held
    transposed): XLA copies one operand and runs its fast GEMM. The (T*B)-long transposed product ran on its
    plain dot, 1.5-2x slower at T=50 (2833396: 4 such products for the GRU)."""
    module = __import__(f"bptt.generated.{name}{BACKENDS['jax'].suffix}", fromlist=["_"])
    params = module.init_params(jax.random.key(0), jnp.float32, **SIZES)
    xs, ys = module.random_inputs(jax.random.key(1), T, B, jnp.float32, **SIZES)
    start = {f"{seq.name}0": jnp.zeros((B, SIZES["h"]), jnp.float32) for seq in load(name).states}
    text = compiled(lambda p, x, y, s: module.loss_and_grads(p, x, y, **s), params, xs, ys, start)
    assert plain_products(text) == []


def updated_outside_loops(text):
    """The shapes (as HLO writes them: "f32[51,16,192]") the compiled program's dynamic-update-slices write
    outside its while loops: in the entry computation and the computations it calls, loops' bodies aside."""
    found = computations(text)
    (entry,) = re.findall(r"^ENTRY (%[\w.\-]+) ", text, re.MULTILINE)
    seen, todo = set(), [entry]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [called for line in found[name] if " while(" not in line for called in CALLED.findall(line)]
    update = re.compile(r"= (\w+\[[\d,]*\])\S* dynamic-update-slice\(")
    return [shape for name in seen for line in found[name] for shape in update.findall(line)]


@pytest.mark.parametrize("name", ["gru", "lstm"])
def test_the_forward_cache_holds_the_scans_outputs(name):
    """The forward pass's values that hold no state are its scan's outputs as they are (steps 1..T), and a state
    its initial value and the scan's outputs concatenated: no array of T+1 steps is written in pieces outside
    the loops (695d7da's GRU wrote 7 such updates: zeros filled before the scan, its outputs copied in after)."""
    module = __import__(f"bptt.generated.{name}{BACKENDS['jax'].suffix}", fromlist=["_"])
    params = module.init_params(jax.random.key(0), jnp.float32, **SIZES)
    xs, ys = module.random_inputs(jax.random.key(1), T, B, jnp.float32, **SIZES)
    start = {f"{seq.name}0": jnp.zeros((B, SIZES["h"]), jnp.float32) for seq in load(name).states}
    text = compiled(lambda p, x, y, s: module.loss_and_grads(p, x, y, **s), params, xs, ys, start)
    assert [shape for shape in updated_outside_loops(text) if shape.startswith(f"f32[{T + 1},")] == []
    states = {seq.name for seq in load(name).states}
    assert {dims[0] for key, dims in module.CACHE.items() if key in states} == {"T+1"}  # the initial state first
    assert {dims[0] for key, dims in module.CACHE.items() if key not in states} == {"T"}  # the input, the gates
