"""Issue 28: what `bptt latex` derives, `bptt codegen` generates in every backend; what one refuses, the other
refuses with the same line. Random cells that read a power or a transpose (tests/support/cells.py: powered_plans),
some with a product the code cannot multiply by added (a matrix power, a transposed block, an outer product), go
through both: they accept the same cells, refuse the others with one line naming the same equation and reason, and
every accepted cell agrees with the oracle (tests/support/oracle.py, which shares no code with codegen) in every
backend. So do random cells with norms, means and sums (tests/support/norm_plans.py)."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import dataclasses
import importlib.util
import sys

import sympy as sp
from hypothesis import HealthCheck, Phase, example, given, settings

from bptt.codegen.backends import BACKENDS
from bptt.derive.model import matrix
from bptt.derive.nodes import t
from bptt.derive.refusal import Refusal
from bptt.documents.render import document
from bptt.tests.support import oracle
from bptt.tests.support.cell_plans import build, h, random_values
from bptt.tests.support.cell_shapes import POWER_SHAPES
from bptt.tests.support.cells import powered_plans
from bptt.tests.support.jax_eager import eagerly
from bptt.tests.support.norm_plans import EXAMPLE, NORM_SHAPES, build_normed, normed_plans

STRANGERS = ("matrix power", "transposed block", "outer product")


def with_stranger(model, stranger):
    """The model with a term added to its last unforced state's equation, a product by a matrix the code cannot
    multiply by (None: the model as it is)."""
    if stranger is None:
        return model
    at = max(k for k, (seq, _) in enumerate(model.steps) if seq in model.states and seq not in model.forced)
    seq, rhs = model.steps[at]
    previous = seq(t - 1)
    extra = matrix("K", h, h)
    params = (*model.params, extra)
    if stranger == "matrix power":
        term = sp.MatPow(extra, 2) * previous
    elif stranger == "transposed block":
        extra = matrix("K", 2 * h, h)
        params = (*model.params, extra)
        term = extra[:h, :].T * previous
    else:
        term = previous * previous.T * previous
    return dataclasses.replace(
        model, params=params, steps=(*model.steps[:at], (seq, rhs + term), *model.steps[at + 1 :])
    )


def outcome(make):
    """(the refusal's reason, its equation), or None if make() returned."""
    try:
        make()
    except Refusal as error:
        assert "\n" not in str(error), str(error)
        return error.what, error.equation
    return None


def load_source(name, source):
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # while it runs (dataclasses look their module up)
    try:
        exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def agree_with_the_oracle(model, sources):
    values = random_values(model, 3, 2, seed=5)
    expected = oracle.run(model, *values)
    for name, source in sources.items():
        module = load_source(f"agree_{name}", source)
        if name == "jax":
            with eagerly(module):
                oracle.compare(module, model, *values, expected=expected)
        else:
            oracle.compare(module, model, *values, forward_mode=True, expected=expected)


DRAWS = {None: 4, **dict.fromkeys(STRANGERS, 3)}  # cells drawn: a refused one costs little, an accepted seconds
SETTINGS = {
    "phases": (Phase.explicit, Phase.generate),
    "suppress_health_check": [HealthCheck.too_slow],
    "deadline": None,
    "database": None,
    "derandomize": True,
}


def check_cells(stranger, drawn):
    """DRAWS[stranger] powered cells, each with the stranger added, through the document and every backend."""

    @settings(max_examples=DRAWS[stranger], **SETTINGS)
    @given(plan=powered_plans())
    def check_cell(plan):
        model = with_stranger(build(plan), stranger)
        drawn.append(model)
        latex, sources = through_both(model)
        assert (latex is None) == (stranger is None), latex
        if latex is None:
            agree_with_the_oracle(model, sources)

    check_cell()


def through_both(model):
    """(the document's refusal or None, {backend: module source}), every backend refusing as the document does."""
    latex = outcome(lambda: document(model, "tex"))
    sources = {}
    for name, backend in BACKENDS.items():
        made = outcome(lambda backend=backend, name=name: sources.__setitem__(name, backend.module_source(model)))
        assert made == latex, (name, made, latex)
    return latex, sources


def test_latex_and_codegen_accept_the_same_cells_and_refuse_the_others_with_one_line():
    """Every backend's module, or its refusal, against the document's: the cells with a stranger refused alike,
    the others accepted and agreeing with the oracle; among the cells, each of issue 28's shapes."""
    drawn = []
    for stranger in DRAWS:
        check_cells(stranger, drawn)
    missing = [shape for shape, has in POWER_SHAPES.items() if not any(has(model) for model in drawn)]
    assert not missing, f"no cell drawn has {missing}"


NORMED_DRAWS = 3  # and EXAMPLE, which has every shape; each derived, documented, generated, run against the oracle


def test_latex_and_codegen_accept_the_same_normalised_cells_and_agree_with_the_oracle():
    """Random cells with layer and RMS norms before or after an activation, a centred pre-activation and a power
    of a sum (tests/support/norm_plans.py): the document and every backend accept the same cells (or refuse them
    with the same line), and every backend agrees with the oracle; among the cells, each of the norms' shapes."""
    drawn = []

    @settings(max_examples=NORMED_DRAWS, **SETTINGS)
    @given(normed=normed_plans())
    @example(normed=EXAMPLE)
    def check_cell(normed):
        model = build_normed(normed)
        drawn.append(model)
        latex, sources = through_both(model)
        assert latex is None, latex
        agree_with_the_oracle(model, sources)

    check_cell()
    missing = [shape for shape, has in NORM_SHAPES.items() if not any(has(model) for model in drawn)]
    assert not missing, f"no cell drawn has {missing}"
