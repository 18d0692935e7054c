"""Random recurrent cells as plans: what each gate and state of each layer of a cell reads
(plain frozen dataclasses), and `build(plan)`, which writes a plan in the model language the way
users write cells (examples/*.py, the README's "Write your own cell"). tests/support/cells.py draws plans.

A plan comes before its SymPy so that a stacked weight knows how many blocks its layer reads
(W_ih1 is k*h x d for k blocks), and so that a test can build the Model itself and report an
error the model language raises while building it.

Blocks of columns, as a layer that reads both directions of a bidirectional layer below writes them: a wide
layer's input term reads every state of the layer below through a block of columns each (W_z2[:, :h] c1_t +
W_z2[:, h:2h] h1_t; in a stacked layer W_ih2[k*h:(k+1)*h, :h] c1_t + ...), and a wide head reads every state of
h rows (V[:, :h] h1_t + V[:, h:2h] h2_t).
"""

import functools
import itertools
import operator
from dataclasses import dataclass

import numpy as np
import sympy as sp
from sympy import HadamardProduct

from bptt.derive.elementwise import FUNCTIONS, Apply
from bptt.derive.model import Model, labels, matrix, sequence, sizes, vector
from bptt.derive.nodes import OneHot, Softmax, SoftmaxCrossEntropy, SquaredError, t

d, h, q = SIZES = sizes("d h q")
VALUES = {"d": 2, "h": 3, "q": 4}  # distinct, so that a transposed shape cannot pass
# The built-in functions with a derivative (the slope entries such as elu' are not activations).
ACTIVATIONS = tuple(sorted(name for name, entry in FUNCTIONS.items() if entry.derivative is not None))
MAX_STATES = 3
POWERS_AND_TRANSPOSES = ("transposed", "antisymmetric", "square", "power")  # term kinds reading a state, own weight
# The exponent of each kind of term that reads a power of a gate through a sigmoid (a positive base)
GATE_POWERS = {"gate root": sp.Rational(1, 2), "gate inverse root": sp.Rational(-1, 2), "gate inverse": -1}
SLICE = "slice"  # the kind of a term that reads the next block of h rows of its layer's wide intermediate

# What a pre-activation term reads:
#   input      W u_t               u_t is x_t in layer 1, the previous layer's state h_t above
#   recurrent  U s_{t-1}           a state of the layer, or the teacher-forced p in layer 1
#   bias       b
#   gate       M g_t               an earlier gate of the layer (a gate feeding a gate)
#   product    U (g_t * s_{t-1})   a matrix times an elementwise product
#   reset      g_t * (U s_{t-1} + b)   as the GRU's candidate reads its reset gate
#   one        + 1                 a scalar in a sum
#   now        M c_t               the layer's other state, at t (an LSTM-like h_t reading c_t)
#   transposed A^T s_{t-1}         a state's own weight, transposed
#   antisymmetric (A - A^T - 1/4 I) s_{t-1}   AntisymmetricRNN's damped antisymmetric weight
#   square     K (s_{t-1} * s_{t-1})          SymPy folds the product into the power s_{t-1}^2
#   power      P (1 + s_{t-1} * s_{t-1})^(-1/2)   an elementwise power of a positive vector (sigma^-1)
#   gate root, gate inverse root, gate inverse   P sigmoid(tanh(g_t))^e   a power of a gate, its base kept in
#              (0.26, 0.74) as apply() keeps exp's argument (GATE_POWERS)
#   slice      a_t[k*h:(k+1)*h, :]   the next block of rows of the layer's wide intermediate a_t (wide_intermediate)


@dataclass(frozen=True)
class Term:
    kind: str
    source: str = ""  # the state a recurrent, product or reset term reads at t-1
    gate: str = ""  # the gate a gate, product or reset term reads at t


@dataclass(frozen=True)
class Gate:
    """An intermediate g_t = f(sum of terms); named: the sum is an intermediate g_bar_t of its own."""

    name: str
    activation: str
    terms: tuple
    named: bool


@dataclass(frozen=True)
class Update:
    """A state's equation:
    activation   s_t = f(sum of terms)
    interpolate  s_t = z_t * n_t + (1 - z_t) * s_{t-1}   gates (z, n); swapped: (1 - z_t) * n_t + z_t * s_{t-1}
    cell         s_t = f_t * s_{t-1} + i_t * g_t          gates (f, i, g); (f, g): f_t * s_{t-1} + (1 - f_t) * g_t
    output       s_t = o_t * f(c_t)                       gate (o,), c the layer's other state at t
    """

    state: str
    form: str
    gates: tuple = ()
    activation: str = "identity"
    terms: tuple = ()
    swapped: bool = False


@dataclass(frozen=True)
class Layer:
    index: int
    states: tuple  # in evaluation order; the last is the layer's output h_l
    stacked: bool  # every input, recurrent and bias term reads a block of one stacked weight
    gates: tuple
    updates: tuple
    wide: bool = False  # layer 2 or 3: its input term reads every state of the layer below, a block of columns each


@dataclass(frozen=True)
class Plan:
    layers: tuple
    loss: str  # "squared" (targets) or "softmax" (integer labels)
    mean: bool
    forcing: bool  # a state p_t = softmax(head), replaced by onehot(y_t) in training
    head_bias: bool
    wide_head: bool = False  # the head reads every state of h rows, a block of columns of V each

    @property
    def states(self):
        return tuple(s for layer in self.layers for s in layer.states) + (("p",) if self.forcing else ())


def sums(layer):
    """The term lists of a layer's sums, in evaluation order."""
    return [g.terms for g in layer.gates] + [u.terms for u in layer.updates if u.form == "activation"]


# --- building a plan as a user writes it -------------------------------------------------------


def build(plan):
    """The plan's Model, written in the model language."""
    cell = _Cell()
    if plan.forcing:
        cell.seq("p", q, "state")
    for layer in plan.layers:
        cell.add_layer(layer)
    return cell.model(plan)


def apply(name, arg):
    """f(arg) for a registry function, its argument kept in range: log reads a positive one,
    log(sigmoid(arg)), and exp a bounded one, exp(tanh(arg)), so that no state overflows."""
    inner = {"log": "sigmoid", "exp": "tanh"}.get(name)
    return Apply(name, arg if inner is None else Apply(inner, arg))


class _Cell:
    def __init__(self):
        self.params = {}  # name: MatrixSymbol, in order of first use
        self.seqs = {"x": sequence("x", d, "input")}
        self.steps = []
        self.layers = []  # the states of each layer added

    def param(self, name, rows, cols):
        if name not in self.params:
            self.params[name] = vector(name, rows) if cols == 1 else matrix(name, rows, cols)
        return self.params[name]

    def seq(self, name, rows=h, role="intermediate"):
        return self.seqs.setdefault(name, sequence(name, rows, role))

    def add_layer(self, layer):
        below = [self.seqs["x"]()] if layer.index == 1 else [self.seqs[f"h{layer.index - 1}"]()]
        if layer.wide and layer.index > 1:
            below = [self.seqs[name]() for name in self.layers[layer.index - 2]]
        self.layers.append(layer.states)
        weights = _Weights(self, layer)
        for name in layer.states:
            self.seq(name, h, "state")
        self.wide_intermediate(layer, below)
        for gate in layer.gates:
            total = self.sum(weights, gate.name, gate.terms, below)
            if gate.named:
                bar = self.seq(f"{gate.name}_bar")
                self.steps.append((bar, total))
                total = bar()
            self.steps.append((self.seq(gate.name), apply(gate.activation, total)))
        for step in layer.updates:
            self.steps.append((self.seqs[step.state], self.update(weights, step, layer, below)))

    def sum(self, weights, target, terms, below):
        """The terms added in their drawn order, as a user writes a sum (a scalar stays a scalar)."""
        return functools.reduce(operator.add, [self.term(weights, target, term, below) for term in terms])

    def term(self, weights, target, term, below):
        kind, layer = term.kind, weights.layer.index
        if kind == "one":
            return 1
        if kind == "input":
            return columns(weights.take(f"W_{target}", sum(v.rows for v in below), f"W_ih{layer}"), below)
        if kind == "bias":
            return weights.take(f"b_{target}", 1, f"b_ih{layer}")
        if kind in GATE_POWERS or kind == SLICE:
            return self.power_or_slice(target, term)
        if kind in ("gate", "now"):
            read = self.seqs[term.gate or term.source]()
            return self.param(f"M_{term.gate or term.source}_{target}", h, h) * read
        source = self.seqs[term.source]
        if source.rows != h:  # the teacher-forced p, read by a recurrent term only
            return self.param(f"U_{term.source}_{target}", h, q) * source(t - 1)
        stacked = f"W_h{term.source[0]}{layer}"
        if kind == "recurrent":
            return weights.take(f"U_{term.source}_{target}", h, stacked) * source(t - 1)
        if kind in POWERS_AND_TRANSPOSES:
            return self.power_or_transpose(kind, self.param(f"A_{term.source}_{target}", h, h), source(t - 1))
        gate = self.seqs[term.gate]()
        if kind == "product":
            return weights.take(f"K_{term.source}_{target}", h, stacked) * HadamardProduct(gate, source(t - 1))
        inner = weights.take(f"N_{term.source}_{target}", h, stacked) * source(t - 1)
        return HadamardProduct(gate, inner + weights.take(f"e_{term.source}_{target}", 1, f"b_hh{layer}"))

    @staticmethod
    def power_or_transpose(kind, weight, previous):
        """A term of a kind in POWERS_AND_TRANSPOSES: the weight (own, never a block) times s_{t-1}."""
        if kind == "transposed":
            return weight.T * previous
        if kind == "antisymmetric":
            return (weight - weight.T - sp.Rational(1, 4) * sp.Identity(h)) * previous
        square = HadamardProduct(previous, previous)
        return weight * (square if kind == "square" else sp.HadamardPower(1 + square, sp.Rational(-1, 2)))

    def wide_intermediate(self, layer, below):
        """Before a layer's gates, when its sums read slices: a_l = W_al u_t + U_al s_{t-1} (s its last state), one
        block of h rows for each slice term and at least two, as Ba et al. split one 4h pre-activation into the
        gates."""
        slices = sum(term.kind == SLICE for terms in sums(layer) for term in terms)
        if not slices:
            return
        blocks = max(2, slices)  # one slice leaves rows no slice reads: their adjoint is zero
        wide = self.seq(f"a{layer.index}", blocks * h)
        previous = self.seqs[layer.states[-1]](t - 1)
        weight = self.param(f"W_a{layer.index}", blocks * h, sum(value.rows for value in below))
        self.steps.append((wide, columns(weight, below) + self.param(f"U_a{layer.index}", blocks * h, h) * previous))
        self.sliced = [wide, 0]  # the wide intermediate, the blocks handed out

    def power_or_slice(self, target, term):
        """A term of a kind in GATE_POWERS (a weight times a power of a gate through a sigmoid) or SLICE."""
        if term.kind == SLICE:
            wide, used = self.sliced
            self.sliced[1] += 1
            return wide()[used * h : (used + 1) * h, :]
        base = Apply("sigmoid", Apply("tanh", self.seqs[term.gate]()))  # in (0.26, 0.74): no power overflows
        return self.param(f"P_{term.gate}_{target}", h, h) * sp.HadamardPower(base, GATE_POWERS[term.kind])

    def update(self, weights, step, layer, below):
        previous = self.seqs[step.state](t - 1)
        gates = [self.seqs[name]() for name in step.gates]
        if step.form == "activation":
            return apply(step.activation, self.sum(weights, step.state, step.terms, below))
        if step.form == "interpolate":
            z, n = gates
            if step.swapped:
                return HadamardProduct(1 - z, n) + HadamardProduct(z, previous)
            return HadamardProduct(z, n) + HadamardProduct(1 - z, previous)
        if step.form == "cell":
            f, *rest = gates
            added = HadamardProduct(*rest) if len(rest) == 2 else HadamardProduct(1 - f, rest[0])
            return HadamardProduct(f, previous) + added
        other = self.seqs[layer.states[0]]()  # output: o_t * f(c_t)
        return HadamardProduct(gates[0], apply(step.activation, other))

    def model(self, plan):
        read = [self.seqs[f"h{len(plan.layers)}"]()]
        if plan.wide_head:
            read = [self.seqs[name]() for name in plan.states if self.seqs[name].rows == h]
        head = columns(self.param("V", q, len(read) * h), read)
        if plan.head_bias:
            head = head + self.param("b_s", q, 1)
        s = sequence("s", q, "output")
        if plan.loss == "softmax":
            y = labels("y", q)
            loss = SoftmaxCrossEntropy(s(), y())
        else:
            y = sequence("y", q, "target")
            loss = SquaredError(s(), y())
        forcing = ()
        if plan.forcing:
            p = self.seqs["p"]
            self.steps.append((p, Softmax(head)))
            forcing = ((p, OneHot(y(), q)),)
        return Model(
            name="cell",
            title="A random cell",
            source="tests/support/cells.py",
            sizes=SIZES,
            params=tuple(self.params.values()),
            inputs=(self.seqs["x"],),
            steps=tuple(self.steps),
            outputs=((s, head),),
            loss=loss,
            mean=plan.mean,
            teacher_forcing=forcing,
        )


def columns(weight, read):
    """weight times each value read through its own block of consecutive columns, or weight times the one value."""
    if len(read) == 1:
        return weight * read[0]
    stops = list(itertools.accumulate(value.rows for value in read))
    blocks = [weight[:, stop - value.rows : stop] * value for stop, value in zip(stops, read, strict=True)]
    return functools.reduce(operator.add, blocks)


class _Weights:
    """The weights of one layer's terms: a parameter of its own for each, or in a stacked layer
    the next block of rows of one parameter per kind (torch's W_ih, W_hh, b_ih, b_hh)."""

    def __init__(self, cell, layer):
        self.cell, self.layer = cell, layer
        self.blocks = {}  # stacked name: [blocks in it, blocks handed out]
        for terms in sums(layer):
            for term in terms:
                for name in _stacked_names(term, layer):
                    self.blocks.setdefault(name, [0, 0])[0] += 1

    def take(self, name, cols, stacked):
        """W_name (h x cols), or the next h rows of the stacked parameter."""
        if not self.layer.stacked:
            return self.cell.param(name, h, cols)
        count, used = self.blocks[stacked]
        self.blocks[stacked][1] += 1
        return self.cell.param(stacked, count * h, cols)[used * h : (used + 1) * h, :]


def _stacked_names(term, layer):
    """The stacked parameters a term reads a block of (none: gate, now, one, and the forced p)."""
    index = layer.index
    recurrent = f"W_h{term.source[:1]}{index}"
    names = {"input": [f"W_ih{index}"], "bias": [f"b_ih{index}"], "recurrent": [recurrent], "product": [recurrent]}
    names["reset"] = [recurrent, f"b_hh{index}"]
    return [] if term.source == "p" else names.get(term.kind, [])


# --- values ----------------------------------------------------------------------------------


@functools.cache
def extent(dim):
    """The length of a dimension (h, 4*h, 1) at VALUES."""
    return int(sp.sympify(dim).xreplace({symbol: VALUES[symbol.name] for symbol in SIZES}))


def random_values(model, steps, batch, seed):
    """(params, xs, ys, initial) at VALUES in float64: weights N(0, 0.36/fan_in), vectors
    N(0, 0.01), non-zero initial states; ys are labels for a softmax cross-entropy."""
    rng = np.random.default_rng(seed)
    params = {}
    for param in model.params:
        rows, cols = extent(param.shape[0]), extent(param.shape[1])
        shape, scale = ((rows,), 0.1) if param.shape[1] == 1 else ((rows, cols), 0.6 / np.sqrt(cols))
        params[param.name] = scale * rng.standard_normal(shape)
    xs = rng.standard_normal((steps, batch, VALUES["d"]))
    if isinstance(model.loss, SoftmaxCrossEntropy):
        ys = rng.integers(0, VALUES["q"], (steps, batch))
    else:
        ys = rng.standard_normal((steps, batch, VALUES["q"]))
    initial = {s.name: 0.5 * rng.standard_normal((batch, extent(s.rows))) for s in model.states}
    return params, xs, ys, initial
