"""The regime an analysis measures in: the cell's input weights and biases scaled down until its activations stay
nearly linear, and the bias of a carousel's gate set, so that the radius of the recurrent matrices decides whether
the gradient vanishes or explodes (with the module's own initialisation tanh saturates, and every radius vanishes).
"""

import math
from dataclasses import dataclass

import numpy as np

from bptt.derive.flow import gate_biases, slope_entries

TARGET = 0.01  # the largest distance of a state from its value at zero input that counts as unsaturated
GATE_BIAS = 1.0  # the carousel gate's bias in the main runs (Gers et al., 2000; Jozefowicz et al., 2015)
CAROUSEL_BIASES = (0.0, 1.0, 5.0)  # the carousel gate's biases of the carousel table


@dataclass(frozen=True)
class Regime:
    """What the runs change in the module's initial parameters, besides the radius."""

    scaled: tuple  # the names of the parameters multiplied by `scale`: the cell's input weights and biases
    scale: float
    carousel: object  # the Carousel whose gate bias is set, or None
    biases: tuple  # the names of that gate's bias vectors

    def params(self, base, recurrent, radius, gate_bias=GATE_BIAS):
        """base with the recurrent matrices at the radius, the scaled ones times scale, the gate's biases summing to
        gate_bias (each an equal share)."""
        out = scaled(base, recurrent, radius)
        out.update({name: base[name] * self.scale for name in self.scaled})
        out.update({name: np.full_like(base[name], gate_bias / len(self.biases)) for name in self.biases})
        return out


def scaled(params, recurrent, radius):
    """params with every recurrent matrix (each of its square blocks) scaled to the given spectral radius."""
    out = dict(params)
    for p in recurrent:
        value = out[p.name] = params[p.name].copy()
        for rows in square_blocks(value):
            value[rows] *= radius / np.max(np.abs(np.linalg.eigvals(value[rows])))
    return out


def square_blocks(matrix):
    """The rows of each square block of a recurrent matrix: all of a square one; the h x h blocks of a stack of
    them, such as lstm-layernorm's W_h of 4h x h (the four gates' recurrent matrices, as the zoo's lstm has them)."""
    rows, cols = matrix.shape
    return [slice(start, start + cols) for start in range(0, rows, cols)]


def block_names(name, matrix):
    """{the name of each square block: its rows}: the matrix's own name, or W_h[0:8], W_h[8:16], ... for a stack."""
    found = square_blocks(matrix)
    if len(found) == 1:
        return {name: found[0]}
    return {f"{name}[{rows.start}:{rows.stop}]": rows for rows in found}


def regime(flow, scale=None):
    """The Regime of a model's flow without its scale yet (1 when given as None; see unsaturated_scale)."""
    outputs = {p.name for _, rhs in flow.model.outputs for p in rhs.free_symbols}
    read = {p.name for _, rhs in flow.model.steps for p in rhs.free_symbols}
    recurrent = {p.name for p in flow.recurrent}
    carousel = next((c for c in flow.carousels if gate_biases(flow.model, c)), None)
    biases = tuple(p.name for p in gate_biases(flow.model, carousel)) if carousel else ()
    names = tuple(p.name for p in flow.model.params if p.name in read - outputs - recurrent - set(biases))
    return Regime(names, 1.0 if scale is None else float(scale), carousel, biases)


def saturates(model):
    """Whether a step applies an elementwise function (tanh, the sigmoid, ...), which scaling can keep linear."""
    return bool(slope_entries(model))


def unsaturated_scale(deviation, target=TARGET):
    """The largest power of ten s <= 1 with deviation(s) <= target, deviation(s) the largest distance of a state
    from its value at zero input with the scaled parameters times s. Near zero the cell is linear and deviation
    proportional to s: each step of the search jumps to about half the target, then s goes up while it may."""
    scale = 1.0
    for _ in range(12):
        found = deviation(scale)
        if found <= target or scale < 1e-300:
            break
        scale *= 0.5 * target / found
    scale = 10.0 ** math.floor(math.log10(scale))
    while scale < 1 and deviation(10 * scale) <= target:
        scale *= 10
    return scale


def state_deviation(module, flow, xs, ys, runs):
    """deviation(s) for unsaturated_scale: the largest |state - state at zero input| over runs, each a function
    of s giving the parameters of one run."""

    def states(params):
        cache = module._PASSES.output_gradient(params, xs, ys, (None,) * len(module.STATES))[2]
        return [cache[state.name] for state in flow.states]

    def deviation(scale):
        found = 0.0
        for run in runs:
            for state, rest in zip(states(run(scale)), states(run(0.0)), strict=True):
                found = max(found, float(np.max(np.abs(state - rest))))
        return found

    return deviation
