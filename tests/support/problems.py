"""Concrete problems shared by the proofs: a zoo model at tiny sizes, with a
symbol for every entry of every parameter and of h_0, and random data."""

import random
from dataclasses import dataclass

import sympy as sp

from bptt.derive.direction import initial_time
from bptt.derive.model import Model
from bptt.derive.models import load
from bptt.derive.nodes import T, t

# d, h, q: distinct, so a transposed or misplaced factor cannot go unnoticed.
SIZES = (2, 3, 4)


def random_rational(rng):
    return sp.Rational(rng.randint(-9, 9), rng.randint(1, 5))


def random_matrix(rng, rows, cols):
    return sp.ImmutableMatrix(rows, cols, lambda i, j: random_rational(rng))


@dataclass
class Problem:
    """A model unrolled over `steps` steps at concrete sizes.

    entries: {"h0" or parameter name: ImmutableMatrix of entry symbols}
    symbolic_env: env for derive.explicit with the entry symbols in it
    point: {entry symbol: random Rational}, where gradients are compared
    """

    model: object
    steps: int
    entries: dict
    symbolic_env: dict
    point: dict

    @property
    def symbols(self):
        return [x for matrix in self.entries.values() for x in matrix]

    def values_env(self, digits=None):
        """symbolic_env at the point; matrices as Floats of `digits` digits if given.

        Sizes and labels stay Integers: they are shapes and indices, not values."""
        env = {}
        for key, value in self.symbolic_env.items():
            if isinstance(value, sp.MatrixBase):
                value = value.xreplace(self.point)
                if digits is not None:
                    value = value.evalf(digits)
            env[key] = value
        return env


def make_problem(name, steps, seed):
    """A zoo model's (or a Model's) Problem; a reverse-time state's initial value enters at steps + 1."""
    model = name if isinstance(name, Model) else load(name)
    rng = random.Random(seed)
    size_of = dict(zip(model.sizes, SIZES, strict=True))
    env = {symbol: sp.Integer(n) for symbol, n in size_of.items()}
    entries = {}

    def named_symbols(name, shape):
        rows, cols = (int(sp.sympify(n).xreplace(size_of)) for n in shape)
        return sp.ImmutableMatrix(rows, cols, lambda i, j: sp.Symbol(f"{name}[{i},{j}]"))

    for param in model.params:
        entries[param.name] = env[param] = named_symbols(param.name, param.shape)
    for state in model.states:
        entry = state(initial_time(model, state).subs(T, steps))
        entries[f"{state.name}0"] = env[entry] = named_symbols(f"{state.name}0", state(0).shape)
    target = model.concrete_loss().target
    for k in range(1, steps + 1):
        for seq in model.inputs:
            if seq.role == "label":  # a word index: a column lookup
                env[seq(k)] = sp.Integer(rng.randrange(int(size_of[seq.rows])))
            else:
                env[seq(k)] = random_matrix(rng, int(size_of[seq.rows]), 1)
        if target.role == "label":
            env[target.subs(t, k)] = sp.Integer(rng.randrange(int(size_of[target.rows])))
        else:
            env[target.subs(t, k)] = random_matrix(rng, int(size_of[target.rows]), 1)
    point = {x: random_rational(rng) for matrix in entries.values() for x in matrix}
    return Problem(model, steps, entries, env, point)
