"""Hypothesis strategies for random recurrent cells composed from the model language:
`cells()` draws a Model, `plans()` the Plan it is built from (tests/support/cell_plans.py).

What they cover: 1-3 states (a layer's h, an LSTM-like c, a teacher-forced output state p),
1-3 layers (layer l+1 reads layer l's state at the same step t, or every state of layer l through blocks of
columns), gates feeding gates with and without named pre-activations, stacked weights read by blocks of rows,
a head reading every state through blocks of columns of V, a matrix times an elementwise
product U (r_t * h_{t-1}), scalars (1 - z_t, + 1), every built-in elementwise function, both
losses summed or averaged, teacher forcing, slices of a wide intermediate (a_t[h:2h, :]) and powers of gates
(sigmoid(tanh(g_t))^(-1/2)). `powered_plans()` adds transposed and antisymmetric
weights (A^T, A - A^T - I/4) and elementwise powers (a square, (1 + s^2)^(-1/2)).
"""

import functools
from dataclasses import replace

from hypothesis import strategies as st

from bptt.tests.support.cell_plans import (
    ACTIVATIONS,
    GATE_POWERS,
    MAX_STATES,
    POWERS_AND_TRANSPOSES,
    SLICE,
    Gate,
    Layer,
    Plan,
    Term,
    Update,
    build,
    sums,
)


def _kept(strategy):
    """A strategy function that hands out one strategy per arguments (hashable ones): Hypothesis checks each new
    strategy object when it is first drawn from, which took about as long as the draws; the draws are the same."""
    return functools.cache(strategy)


@_kept
def _sampled(values):
    return st.sampled_from(values)


@_kept
def _some_of(values):
    """1-3 distinct values, in the order drawn."""
    return st.lists(_sampled(values), min_size=1, max_size=3, unique=True)


@_kept
def _permutations(values):
    return st.permutations(values)


def activations():
    return st.sampled_from(ACTIVATIONS)


@_kept
@st.composite
def terms(draw, states, gates, forced=()):
    """1-3 distinct terms of a pre-activation, at least one of which reads a value, and now and
    then a + 1 among them; the layer's states (h rows) may be read by any term, a teacher-forced state
    (q rows) by a recurrent one only."""
    options = [Term("input"), Term("bias")]
    options += [Term("recurrent", source=s) for s in (*states, *forced)]
    for g in gates:
        options.append(Term("gate", gate=g))
        options += [Term(kind, source=s, gate=g) for kind in ("product", "reset") for s in states]
    options += slices_and_powers(gates)
    chosen = list(draw(_some_of(tuple(options))))
    chosen = whole_slice(chosen)
    if chosen == [Term("bias")]:
        chosen.insert(draw(st.integers(0, 1)), Term("input"))
    if draw(st.integers(0, 9)) == 4:  # (Hypothesis favours the ends of a range)
        # where the partial sum reads a sequence value: the README refuses b + 1 before any
        first = next(i for i, term in enumerate(chosen) if term.kind != "bias")
        chosen.insert(draw(_sampled((0,) * (first == 0) + tuple(range(first + 1, len(chosen) + 1)))), Term("one"))
    return tuple(chosen)


@_kept
@st.composite
def gates(draw, layer, states, forced, most):
    """0..most gates of a layer, each reading the layer's states and the gates before it."""
    made = []
    for name in "zrfiog"[: draw(st.integers(0, most))]:
        gate_terms = draw(terms(states, tuple(g.name for g in made), forced))
        made.append(Gate(f"{name}{layer}", draw(activations()), gate_terms, draw(st.booleans())))
    return tuple(made)


@_kept
@st.composite
def update(draw, state, gate_names, states, forced, read_now=None):
    """A state's equation, drawn among the forms its layer's gates allow. read_now is the layer's
    other state, already computed at t (an LSTM's c), which this equation then reads."""
    if read_now is None:
        forms = ["activation"] + ["interpolate", "cell"] * (len(gate_names) >= 2)
    else:
        forms = ["activation"] + ["output"] * bool(gate_names)
    form = draw(_sampled(tuple(forms)))
    if form == "interpolate":
        return Update(state, form, distinct(draw, gate_names, 2), swapped=draw(st.booleans()))
    if form == "cell":
        return Update(state, form, distinct(draw, gate_names, draw(st.integers(2, min(3, len(gate_names))))))
    if form == "output":
        return Update(state, form, distinct(draw, gate_names, 1), activation=draw(activations()))
    state_terms = draw(terms(states, gate_names, forced))
    if Term("recurrent", source=state) not in state_terms:
        state_terms += (Term("recurrent", source=state),)  # every state reads itself at t-1
    if read_now is not None:
        state_terms += (Term("now", source=read_now),)  # h_t reads the layer's c_t
    return Update(state, form, activation=draw(activations()), terms=state_terms)


def slices_and_powers(gates):
    """The terms that read a block of rows of the layer's wide intermediate, or a power of a gate through a sigmoid:
    in the sums that may read a gate (those after a layer's first gate)."""
    return [Term(SLICE)] * bool(gates) + [Term(kind, gate=g) for kind in GATE_POWERS for g in gates]


def whole_slice(chosen):
    """A sum that reads a slice is that slice alone, as Ba et al.'s gates are blocks of one pre-activation (a slice
    inside a longer sum would stack long adjoints into dL/da_t's column, wider than the page)."""
    return [Term(SLICE)] if Term(SLICE) in chosen else chosen


def distinct(draw, names, count):
    return tuple(draw(_permutations(tuple(names)))[:count])


@_kept
@st.composite
def layers(draw, index, states_left, forcing, below=1):
    """Layer `index`: one state h, or two (c, then h reading c_t) when the budget allows; reading every one of the
    `below` states of the layer below (wide), when there are two, or its h."""
    two = states_left >= 2 and draw(st.booleans())
    names = (f"c{index}", f"h{index}") if two else (f"h{index}",)
    forced = ("p",) if forcing and index == 1 else ()
    layer_gates = draw(gates(index, names, forced, most=2 if two else 3))
    gate_names = tuple(g.name for g in layer_gates)
    updates = [draw(update(names[0], gate_names, names, forced))]
    if two:
        updates.append(draw(update(names[1], gate_names, names, forced, read_now=names[0])))
    wide = below > 1 and draw(st.booleans())
    layer = Layer(index, names, draw(st.booleans()), layer_gates, tuple(updates), wide)
    layer = read_somewhere(layer, Term("input"))  # x_t, or the layer below at t
    return read_somewhere(layer, Term("recurrent", source="p")) if forced else layer


def read_somewhere(layer, term):
    """The layer with `term` added to its first sum, unless one of its sums has it."""
    if any(term in terms for terms in sums(layer)):
        return layer
    if layer.gates:
        first = layer.gates[0]
        first = replace(first, terms=first.terms + (term,))
        return replace(layer, gates=(first, *layer.gates[1:]))
    first = layer.updates[0]  # no gates: the first state's form is "activation"
    return replace(layer, updates=(replace(first, terms=first.terms + (term,)), *layer.updates[1:]))


@st.composite
def plans(draw):
    loss = draw(st.sampled_from(("squared", "softmax")))
    forcing = loss == "softmax" and draw(st.booleans())
    budget = MAX_STATES - forcing
    drawn = []
    while budget > 0 and (not drawn or draw(st.booleans())):
        layer = draw(layers(len(drawn) + 1, budget, forcing, len(drawn[-1].states) if drawn else 1))
        drawn.append(layer)
        budget -= len(layer.states)
    wide_head = sum(len(layer.states) for layer in drawn) > 1 and draw(st.booleans())
    return Plan(tuple(drawn), loss, draw(st.booleans()), forcing, draw(st.booleans()), wide_head)


@st.composite
def powered_plans(draw):
    """plans() with 1-3 terms that read a power or a transpose of a layer's state (POWERS_AND_TRANSPOSES) added
    to drawn sums, the first to the first layer's first sum; apart from plans(), whose draws are the proven cells'."""
    plan = draw(plans())
    layers = list(plan.layers)
    for n in range(draw(st.integers(1, 3))):
        k = draw(st.integers(0, len(layers) - 1)) if n else 0
        term = Term(draw(st.sampled_from(POWERS_AND_TRANSPOSES)), source=draw(st.sampled_from(layers[k].states)))
        layers[k] = with_term(layers[k], draw(st.integers(0, len(sums(layers[k])) - 1)) if n else 0, term)
    return replace(plan, layers=tuple(layers))


def with_term(layer, index, term):
    """The layer with term added to its sum number `index` (sums' order), unless that sum has it."""
    if index < len(layer.gates):
        gate = layer.gates[index]
        gates = list(layer.gates)
        gates[index] = gate if term in gate.terms else replace(gate, terms=gate.terms + (term,))
        return replace(layer, gates=tuple(gates))
    summed = [k for k, update in enumerate(layer.updates) if update.form == "activation"]
    at = summed[index - len(layer.gates)]
    updates = list(layer.updates)
    update = updates[at]
    updates[at] = update if term in update.terms else replace(update, terms=update.terms + (term,))
    return replace(layer, updates=tuple(updates))


def cells():
    """Random Models: random Plans, built."""
    return plans().map(build)


def truncations(steps):
    """("window", k) or ("chunk", k), k = 1..T."""
    return st.tuples(st.sampled_from(("window", "chunk")), st.integers(1, steps))
