"""The runs of an analysis: the module, the sequence and the parameters they share (Setup), the regime they run in
(the input scale, in words too) and the radii, with a larger one where the gradient grows if the default radii show
no growth."""

from dataclasses import dataclass, replace

import numpy as np

from bptt.app.analysis.defaults import RADII, SIZE
from bptt.app.analysis.jacobians import NoFlow, measured_jacobians, step_jacobians
from bptt.app.analysis.regime import (
    CAROUSEL_BIASES,
    GATE_BIAS,
    TARGET,
    regime,
    saturates,
    state_deviation,
    unsaturated_scale,
)
from bptt.app.verify.check import load_module
from bptt.derive.direction import forward_only
from bptt.derive.flow import gradient_flow
from bptt.derive.models import ZOO

GROWS = 1.05  # a step Jacobian's spectral radius above which the default radii count as showing growth


@dataclass(frozen=True)
class Setup:
    """What every run of one analysis shares."""

    flow: object
    module: object
    base: dict  # the module's initial parameters
    xs: object
    ys: object
    sizes: dict
    recurrent: tuple  # the square recurrent matrices (or stacks of them), scaled to each radius
    regime: object
    radii: tuple

    def params(self, radius, gate_bias=GATE_BIAS):
        return self.regime.params(self.base, self.recurrent, radius, gate_bias)

    def cache(self, params):
        return self.module._PASSES.output_gradient(params, self.xs, self.ys, (None,) * len(self.module.STATES))[2]


def setup(model, steps, seed, radii, scale):
    """The Setup of an analysis; without a scale, one that keeps every state within regime.TARGET of its value at
    zero input in every run, for a cell with an elementwise function (the linear cell keeps 1). Without radii,
    RADII and, if the step Jacobian grows at none of them, the first of 2, 4, 8, 16 times the largest that does."""
    forward_only(model, "the gradient-flow analysis")
    flow = gradient_flow(model, measured=True)
    if not flow.states:
        raise NoFlow(f"{model.name}: teacher forcing makes every state data, so no gradient flows between steps")
    recurrent = tuple(p for p in flow.recurrent if stacks_squares(p))  # a radius needs a square matrix, or a stack
    if not recurrent:
        raise NoFlow(f"{model.name}: no square matrix multiplies a state read at t-1, so there is no radius to scale")
    module = load_module(model, from_zoo=not model.spec and model.name in ZOO)
    sizes = {name: SIZE for name in module.SIZES}
    rng = np.random.default_rng(seed)
    base = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, steps, 1, **sizes)
    found = _scaled(Setup(flow, module, base, xs, ys, sizes, recurrent, regime(flow, scale), radii or RADII), scale)
    if radii is None and growth(found, max(RADII)) <= GROWS:
        larger = [f * max(RADII) for f in (2, 4, 8, 16)]
        found = _scaled(
            replace(found, radii=RADII + (next((r for r in larger if growth(found, r) > GROWS), 16),)), scale
        )
    return found, rng


def _scaled(found, scale):
    if scale is None and saturates(found.flow.model):
        return replace(found, regime=replace(found.regime, scale=unsaturated_scale(deviation(found, found.radii))))
    return found


def stacks_squares(matrix):
    """Whether a parameter matrix is square, or a stack of square blocks (4h x h)."""
    rows, cols = matrix.shape
    return bool((rows / cols).is_integer and (rows / cols).is_positive)


def growth(found, radius):
    """The spectral radius of the first step's Jacobian at the radius: its growth per step near zero input."""
    return float(max(abs(np.linalg.eigvals(jacobians_at(found, found.params(radius))[0]))))


def regime_words(found, radii):
    """The regime of the runs at the radii, in words."""
    if not saturates(found.flow.model):
        words = "linear"
    else:
        words = "nearly linear" if deviation(found, radii)(found.regime.scale) <= TARGET else "saturated"
    return f"{words}, input scale {found.regime.scale:g}, spectral radius {', '.join(f'{r:g}' for r in radii)}"


def deviation(found, radii):
    """deviation(scale) of every run of the analysis: each radius, and the carousel's biases at the smallest."""
    runs = [(radius, GATE_BIAS) for radius in radii]
    runs += [(min(radii), bias) for bias in CAROUSEL_BIASES] if found.regime.carousel else []

    def run(radius, bias):
        return lambda scale: replace(found.regime, scale=scale).params(found.base, found.recurrent, radius, bias)

    return state_deviation(found.module, found.flow, found.xs, found.ys, [run(*args) for args in runs])


def jacobians_at(found, params):
    """The step Jacobians J_1..J_T of a run: derived, or measured where the flow has no closed form."""
    cache = found.cache(params)
    if found.flow.measured:
        return measured_jacobians(found.flow, found.module, params, found.xs, found.ys, cache)
    return step_jacobians(found.flow, found.module, params, found.xs, cache, found.sizes)
