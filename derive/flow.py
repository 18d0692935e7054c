"""Gradient flow through time, derived from a model's own step Jacobian.

The closed form writes dL/dh_t with A_k, the transposed Jacobian of step k. Its
transpose J_k = dh_k/dh_{k-1} is the step's Jacobian, and the chain rule through
the steps between t and T gives dh_T/dh_t = J_T J_{T-1} ... J_{t+1}, the newest
step on the left. Where J_k factors into diag(phi'(.)) and weight matrices, the
product is bounded by (gamma sigma_max(W))^(T-t), gamma = sup|phi'| (Pascanu,
Mikolov and Bengio, 2013). A constant J (the linear cell) gives powers W^(T-t),
whose eigenvalues are lambda^(T-t). A state whose own equation reads it through a
diagonal, c_t = f_t * c_{t-1} + ..., carries the gradient along that path through
diagonal factors only: the LSTM's constant error carousel, dc_t/dc_{t-1} = diag(f_t).
"""

from collections.abc import Mapping
from dataclasses import dataclass

import sympy as sp

from bptt.derive.adjoint import backprop
from bptt.derive.atoms import atoms
from bptt.derive.bptt import NEXT, SAME, derive
from bptt.derive.closed_form import NoClosedForm, block_closed_form, closed_form, k, linear_coefficient
from bptt.derive.elementwise import Apply, derivative, lookup
from bptt.derive.nodes import Adj, Diag, SeqAt, matrix_sum, t


@dataclass(frozen=True)
class Bound:
    """||J_k||_2 <= gamma * prod sigma_max(W) for J_k a product of diag(phi'(.)) factors and matrices W."""

    gamma: object  # the product of the diagonal factors' slope bounds sup|phi'|
    slopes: tuple  # the registry names of those functions, in the order of the factors
    matrices: tuple  # the MatrixSymbols W of the product


@dataclass(frozen=True)
class Carousel:
    """A state read by its own equation through a diagonal: ds_k/ds_{k-1} along that path is `direct`."""

    state: object  # the Seq
    direct: object  # a Diag at step k, e.g. diag(f_k)
    partial: object  # ds_k/ds_{k-1} with the other states at k-1 held fixed (diag(f_k) for torch's LSTM)


@dataclass(frozen=True)
class Flow:
    """How the gradient flows back through a model's states.

    states:     the states the gradient flows through (none when teacher forcing makes every state data)
    jacobian:   J_k = dh_k/dh_{k-1} for a single state, else None
    blocks:     {(row, col): (A^{col,row}_k)^T = d row_k / d col_{k-1}} for several states, the other states at k-1
                held fixed: the closed form's blocks, transposed
    couplings:  {(row, col): d row_k / d col_k} within one step (the LSTM's h_k = o_k * tanh(c_k) reads c_k)
    bound:      a Bound of ||J_k||_2, or None when J_k is not a single product of diagonals and matrices
    carousels:  the states with a direct diagonal path from step to step
    recurrent:  the parameters that multiply a state read at t-1
    """

    model: object
    states: tuple
    jacobian: object
    blocks: dict
    couplings: dict
    bound: Bound | None
    carousels: tuple
    recurrent: tuple

    @property
    def measured(self):
        """No closed form of the step Jacobian (gradient_flow's measured=True): it is measured, not derived."""
        return bool(self.states) and self.jacobian is None and not self.blocks

    @property
    def is_power(self):
        """A constant Jacobian: the product is a matrix power."""
        return self.jacobian is not None and k not in self.jacobian.free_symbols


def gradient_flow(model, derivation=None, block_form=None, measured=False):
    """The Flow of a model, from the derivation with every intermediate substituted (derived here unless
    given, with its block closed form for several states, so that a caller that has them derives once).
    Where the step Jacobian has no closed form (a norm's adjoint is not a left multiple of the state's), NoClosedForm;
    with measured=True, the Flow without jacobian and blocks instead (Flow.measured), for a caller that measures
    the step Jacobian numerically."""
    derivation = derive(model) if derivation is None else derivation
    order = [seq for seq, _ in model.steps]
    states = tuple(sorted(derivation.states, key=order.index))
    if not any(c.when == NEXT for contributions in derivation.states.values() for c in contributions):
        states = ()  # no step reads an earlier state (or reads it through a flat function): nothing flows back
    try:
        states, jacobian, blocks = _closed_jacobian(derivation, states, block_form)
    except NoClosedForm:
        if not measured:
            raise
        jacobian, blocks = None, {}
    bound = jacobian_bound(model, jacobian) if jacobian is not None else None
    carousels = tuple(c for c in (carousel(model, derivation, s) for s in states) if c is not None)
    coupled = couplings(derivation, states)
    return Flow(model, states, jacobian, blocks, coupled, bound, carousels, recurrent_params(model, states))


def _closed_jacobian(derivation, states, block_form):
    """(states, J_k, {}) for a single state, (states in the block form's order, None, the blocks of J_k) for
    several: from the closed form."""
    if len(states) < 2:
        return states, (closed_form(derivation, states[0]).jacobian.T if states else None), {}
    form = block_closed_form(derivation) if block_form is None else block_form
    return form.states, None, _Transposed(form.blocks, form.states)  # form.blocks writes every block out: read once


class _Transposed(Mapping):
    """{(row, col): written[(col, row)].T} over the states, each block transposed when first read: the documents
    ask only whether there are blocks, and SymPy takes seconds to transpose those of many states."""

    def __init__(self, written, states):
        self._written, self._keys, self._read = written, [(row, col) for row in states for col in states], {}

    def __getitem__(self, key):
        if key not in self._read:
            if key not in self._keys:
                raise KeyError(key)
            self._read[key] = self._written[key[::-1]].T
        return self._read[key]

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)


def couplings(derivation, states):
    """{(row, col): d row_k / d col_k} for a state `row` computed from the state `col` in the same step,
    from col's adjoint: its same-step terms that end in dL/d row_t."""
    out = {}
    for col in states:
        for row in states:
            terms = [
                c.value
                for c in derivation.states[col]
                if c.when == SAME and row != col and Adj(row(t)) in atoms(c.value, Adj)
            ]
            if terms:
                out[(row, col)] = linear_coefficient(matrix_sum(terms), Adj(row(t))).T.subs(t, k)
    return out


def slope_entries(model):
    """{phi'(.) at step k, as the derivation writes it: registry entry} for every elementwise function of the steps."""
    found = {}
    for seq, rhs in model.steps:
        for node in sp.preorder_traversal(rhs):
            if isinstance(node, Apply):
                out = seq(t) if node == rhs else node
                found[derivative(node, out).subs(t, k).doit()] = lookup(node.function)  # doit: canonical order
    return found


def jacobian_bound(model, jacobian):
    """The Bound of J_k if it is one product of diagonal slopes with a slope bound and of parameters; else None."""
    coeff, factors = jacobian.as_coeff_matrices() if isinstance(jacobian, sp.MatMul) else (sp.S.One, [jacobian])
    slopes, gamma, matrices = slope_entries(model), abs(coeff), []
    names = []
    for factor in factors:
        base = factor.arg if isinstance(factor, sp.Transpose) else factor
        if isinstance(base, sp.MatrixSymbol) and base in model.params:
            matrices.append(base)
        elif isinstance(factor, Diag) and getattr(slopes.get(factor.vector.doit()), "slope_bound", None) is not None:
            entry = slopes[factor.vector.doit()]
            gamma *= entry.slope_bound
            names.append(entry.name)
        else:
            return None
    return Bound(sp.nsimplify(gamma), tuple(names), tuple(matrices)) if matrices else None


def carousel(model, derivation, state):
    """The Carousel of a state whose own equation reads it at t-1 through a diagonal, else None."""
    rhs = dict(model.steps)[state]
    grads = backprop(rhs, Adj(state(t)), out=state(t))
    if state(t - 1) not in grads:
        return None
    try:
        direct = linear_coefficient(grads[state(t - 1)], Adj(state(t))).T
    except NoClosedForm:  # not a left multiple of the adjoint: no diagonal path to show
        return None
    if not isinstance(direct, Diag):
        return None
    nxt = Adj(state(t + 1))
    own = [c.value for c in derivation.states[state] if c.when == NEXT and nxt in atoms(c.value, Adj)]
    try:
        partial = linear_coefficient(matrix_sum(own), nxt).T.subs(t, k - 1)
    except NoClosedForm:  # a term reads the state's adjoint and another's together: no partial to show
        return None
    return Carousel(state, direct.subs(t, k), partial)


@dataclass(frozen=True)
class Makeup:
    """What a Jacobian (a sum of products) is made of, read off its factors."""

    diagonal: bool  # every term is a product of diagonal matrices (scalars aside)
    weights: tuple  # the parameter matrices among its factors, outside any diag, in model order
    slopes: tuple  # the registry names of the activation slopes among its diag factors, sorted
    scales: tuple  # the parameter vectors v of its diag(v) factors (peepholes), in model order


def makeup(model, jacobian):
    """The Makeup of a Jacobian at step k, e.g. dc_k/dc_{k-1}: so that what a document says of its form is
    computed from the derivation (diagonal or not, with which weights and which slopes)."""
    slopes = slope_entries(model)
    terms = jacobian.args if isinstance(jacobian, sp.MatAdd) else (jacobian,)
    diagonal, weights, slope_names, scales = True, set(), set(), set()
    for term in terms:
        factors = term.as_coeff_matrices()[1] if isinstance(term, sp.MatMul) else [term]
        for factor in factors:
            if isinstance(factor, Diag):
                vector = factor.vector.doit()
                if vector in slopes:
                    slope_names.add(slopes[vector].name)
                elif vector in model.params:
                    scales.add(vector)
            elif not isinstance(factor, sp.Identity):
                diagonal = False
                base = factor.arg if isinstance(factor, sp.Transpose) else factor
                weights |= {p for p in atoms(base, sp.MatrixSymbol) if p in model.params}
    in_order = lambda found: tuple(p for p in model.params if p in found)  # noqa: E731
    return Makeup(diagonal, in_order(weights), tuple(sorted(slope_names)), in_order(scales))


def gate(model, vector):
    """The intermediate Seq whose value `vector` is, when its equation is a sigmoid (a gate, in (0, 1)); else None."""
    if not isinstance(vector, SeqAt):
        return None
    for seq, rhs in model.steps:
        if seq.name == vector.name and isinstance(rhs, Apply) and lookup(rhs.function).name == "sigmoid":
            return seq
    return None


def recurrent_params(model, states):
    """The parameters that multiply one of the states at t-1 (W_hh, W, the LSTM's W_h*), in model order."""
    names = {s.name for s in states}
    found = set()
    for _, rhs in model.steps:
        for node in sp.preorder_traversal(rhs):
            if not isinstance(node, sp.MatMul):
                continue
            factors = node.as_coeff_matrices()[1]
            for left, right in zip(factors, factors[1:], strict=False):
                if isinstance(right, SeqAt) and right.name in names and right.time == t - 1:
                    found.add(left)
    return tuple(p for p in model.params if p in found)


def eigen_power_step():
    """(Q Lambda^n Q^-1)(Q Lambda Q^-1) and Q Lambda^(n+1) Q^-1: equal, the induction step of
    W^n = Q Lambda^n Q^-1 for W = Q Lambda Q^-1 (the middle Q^-1 Q cancels)."""
    size = sp.Symbol("m", integer=True, positive=True)
    n = sp.Symbol("n", integer=True, nonnegative=True)
    Q, Lam = sp.MatrixSymbol("Q", size, size), sp.MatrixSymbol("Lambda", size, size)
    return (Q * Lam**n * Q.I) * (Q * Lam * Q.I), Q * Lam ** (n + 1) * Q.I


def power_eigenvalues(matrix, power):
    """The eigenvalues of matrix**power, and the powers of matrix's eigenvalues, as {value: multiplicity}, exactly."""
    powered = {}
    for value, multiplicity in sp.Matrix(matrix).eigenvals().items():
        key = sp.nsimplify(sp.expand(value**power))
        powered[key] = powered.get(key, 0) + multiplicity
    of_power = {sp.nsimplify(sp.expand(v)): m for v, m in (sp.Matrix(matrix) ** power).eigenvals().items()}
    return of_power, powered


def gate_biases(model, carousel):
    """The bias vectors added into the pre-activation of the carousel's gate (b_if and b_hf for f_t of torch's LSTM),
    in model order: the gate followed back through named intermediates and elementwise functions to a sum."""
    rules = {seq.name: rhs for seq, rhs in model.steps}
    node = carousel.direct.vector
    while isinstance(node, Apply) or (isinstance(node, SeqAt) and node.role == "intermediate"):
        node = node.arg if isinstance(node, Apply) else rules[node.name]
    terms = set(node.args) if isinstance(node, sp.MatAdd) else {node}
    return tuple(p for p in model.params if p in terms and p.shape[1] == 1)
