"""Cells that the tool refuses, one per raise site of derive/ and codegen/ (tests/derive/test_refusals.py walks
the sites with ast and triggers each): CELLS, by the site's path, function and first words; INTERNAL, the sites
no model reaches, with a word of why."""

import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.elementwise import FUNCTIONS, Apply, Elementwise
from bptt.derive.model import Model, labels, matrix, sequence, sizes
from bptt.derive.nodes import GenericLoss, OneHot, SquaredError, t, tanh

# Cells, written as a user writes one (tests/support/user_cells.py). `tiny` is d2l's linear RNN with fields replaced.
d, h, q = sizes("d h q")
W_hx, W_hh, W_qh = matrix("W_hx", h, d), matrix("W_hh", h, h), matrix("W_qh", q, h)
x, hidden, a = sequence("x", d, "input"), sequence("h", h, "state"), sequence("a", h, "intermediate")
o, y = sequence("o", q, "output"), sequence("y", q, "target")
back = sequence("g", h, "state")  # a reverse-time state, read at t+1
third, words = sequence("k", h, "state"), labels("x", d)
forward_reading_back = W_hx * x() + W_hh * hidden(t - 1) + W_hh * back()


class Clipped(sp.MatrixExpr):
    """A node of a user's own that no rule knows, clip(v)."""

    def __new__(cls, arg):
        return sp.MatrixExpr.__new__(cls, arg)

    shape = property(lambda self: self.args[0].shape)


def tiny(**changes):
    fields = dict(
        name="tiny",
        title="tiny",
        source="tests",
        sizes=(d, h, q),
        params=(W_hx, W_hh, W_qh),
        inputs=(x,),
        steps=((hidden, W_hx * x() + W_hh * hidden(t - 1)),),
        outputs=((o, W_qh * hidden()),),
        loss=SquaredError(o(), y()),
    )
    fields.update(changes)
    return Model(**fields)


def state(rhs, *extra):
    """tiny with h_t = rhs, and extra parameters."""
    return tiny(steps=((hidden, rhs),), params=(W_hx, W_hh, W_qh, *extra))


def unread(rhs, *extra):
    """tiny with an intermediate a_t = rhs that nothing reads."""
    return tiny(steps=((a, rhs), (hidden, W_hx * x() + W_hh * hidden(t - 1))), params=(W_hx, W_hh, W_qh, *extra))


def onehot_cell(factor, *extra):
    """h_t = tanh(factor onehot(x_t) + W_hh h_{t-1}), x a label input, and extra parameters."""
    words = labels("x", d)
    rhs = tanh(factor * OneHot(words(), d) + W_hh * hidden(t - 1))
    return tiny(inputs=(words,), steps=((hidden, rhs),), params=(W_hx, W_hh, W_qh, *extra))


def with_function(monkeypatch):
    """A cell with a function registered for the test only, which no backend has code for."""
    entry = Elementwise("cubed", sp.tanh, lambda x, y: OneMatrix(*x.shape), "cubed")
    monkeypatch.setitem(FUNCTIONS, "cubed", entry)
    return state(Apply("cubed", W_hx * x() + W_hh * hidden(t - 1)))


def model_file(tmp_path, body, function="cell"):
    """The spec of a model file holding body."""
    path = tmp_path / "cells.py"
    header = "import sys\nfrom bptt.derive.model import Model, matrix, sequence, sizes\n"
    path.write_text(header + body, encoding="utf-8")
    return f"{path}:{function}"


W = matrix("W", h, h)
W2, V = matrix("W2", 2 * h, h), matrix("V", h, d)
U2 = matrix("U2", h, 2 * d)
x2 = sequence("x2", 2 * d, "input")


def norm_file(tmp_path, call):
    """The spec of a model file whose function returns `call`, a norm or a reduction called wrongly."""
    imports = "from bptt.derive.nodes import layer_norm, mean, rms_norm\n"
    body = f"def cell():\n    h = sizes('h')\n    x = sequence('x', h, 'input')\n    return {call}\n"
    return model_file(tmp_path, imports + body)


# site key -> (how it is triggered, the cell): "build" the model, "derive" it, "latex" (its document's sections),
# a backend's name (its module), "load" (a model file; the cell takes tmp_path and returns its spec);
# with_function takes pytest's monkeypatch.
# The site's own words are the key, so that a message reworded is a key to update here.
CELLS = {
    # derive/model.py and derive/validation.py: the description
    "derive/model.py sequence: sequence : role must be one of , got": (
        "load",
        lambda tmp: model_file(tmp, "def cell():\n    return sequence('x', 3, 'weird')\n"),
    ),
    "derive/validation.py validate: : a name must be letters, digits, '-' and '_',": (
        "build",
        lambda: tiny(name="tiny!"),
    ),
    "derive/validation.py validate: : no state; a recurrent model needs a step with": (
        "build",
        lambda: tiny(steps=((a, W_hx * x()),), outputs=((o, W_qh * a()),)),
    ),
    "derive/validation.py validate: : no output; give at least one (Seq, rhs) in": ("build", lambda: tiny(outputs=())),
    "derive/validation.py validate: : loss must be a loss node such as GenericLoss(o(t),": (
        "build",
        lambda: tiny(loss=tanh(o())),
    ),
    "derive/validation.py validate: : expected one input sequence, got": ("build", lambda: tiny(inputs=(x, x2))),
    "derive/validation.py validate: : is assigned in the wrong place for role": (
        "build",
        lambda: tiny(steps=(*tiny().steps, (y, W_qh * hidden()))),
    ),
    "derive/validation.py validate: : _t has rows but its right-hand side has shape": (
        "build",
        lambda: tiny(outputs=((o, W_hh * hidden()),)),
    ),
    "derive/validation.py validate: : in the equation of _t is not a parameter": (
        "build",
        lambda: tiny(steps=((hidden, W_hx * x() + W * hidden(t - 1)),)),
    ),
    "derive/validation.py validate: : teacher forcing replaces , which is not a state": (
        "build",
        lambda: tiny(teacher_forcing=((o, y()),)),
    ),
    "derive/validation.py validate: : teacher forcing must replace _t by data of shape": (
        "build",
        lambda: tiny(teacher_forcing=((hidden, y()),)),
    ),
    "derive/validation.py _check_names: : sizes must be a tuple of size symbols, e.g.": (
        "build",
        lambda: tiny(sizes=[d, h, q]),
    ),
    "derive/validation.py _check_names: : params must be a tuple of matrix(...) and vector(...),": (
        "build",
        lambda: tiny(params=[W_hx, W_hh, W_qh]),
    ),
    "derive/validation.py _check_names: : the is listed times; list each once": (
        "build",
        lambda: tiny(params=(W_hx, W_hh, W_hh, W_qh)),
    ),
    "derive/validation.py _check_names: : names a parameter and a sequence; give each its": (
        "build",
        lambda: tiny(params=(W_hx, W_hh, W_qh, matrix("a", h, h)), steps=((a, W_hx * x()), *tiny().steps)),
    ),
    "derive/validation.py _check_sequences: : two sequences are named ( of rows and of": (
        "build",
        lambda: state(W_hx * x() + W_hh * hidden(t - 1) + W_hh * sequence("x", h, "input")()),
    ),
    "derive/validation.py _check_sequences: : the sequence is assigned times; assign each sequence once": (
        "build",
        lambda: tiny(steps=(*tiny().steps, *tiny().steps)),
    ),
    "derive/validation.py _check_identifier: : is not a Python identifier; names become variables of": (
        "build",
        lambda: state(W_hx * x() + W_hh * hidden(t - 1), matrix("W-1", h, h)),
    ),
    "derive/validation.py _check_identifier: : Python reads the name as (identifiers are NFKC-normalised), so": (
        "build",
        lambda: state(W_hx * x() + W_hh * hidden(t - 1), matrix("Ｗ", h, h)),
    ),
    "derive/validation.py _check_identifier: : the name starts with _, which the generated code": (
        "build",
        lambda: state(W_hx * x() + W_hh * hidden(t - 1), matrix("_W", h, h)),
    ),
    "derive/validation.py _check_dimension: : has a dimension ; expected one of its sizes": (
        "build",
        lambda: state(W_hx * x() + W_hh * hidden(t - 1), matrix("Z", h, 3)),
    ),
    "derive/validation.py _check_elementwise: : in the equation of _t, SymPy's () is a": (
        "build",
        lambda: state(sp.exp(W_hx * x() + W_hh * hidden(t - 1))),
    ),
    "derive/validation.py _check_elementwise: : the equation of _t must be a column vector,": (
        "build",
        lambda: state(sp.Symbol("z")),
    ),
    "derive/validation.py _check_inner_shapes: : in the equation of _t, ( x ) times": (
        "build",
        lambda: state(tanh(W_hx * x()) + W_hx * tanh(W_hh * hidden(t - 1))),
    ),
    "derive/validation.py _check_inner_shapes: : in the equation of _t, terms of different shapes": (
        "build",
        lambda: state(W_hh * hidden(t - 1) + sp.HadamardProduct(x(), tanh(x()))),
    ),
    "derive/validation.py _check_reference: : _t reads _(), but only states may be read": (
        "build",
        lambda: state(W_hx * x(t - 1) + W_hh * hidden(t - 1)),
    ),
    # derive/direction.py: forward and reverse-time states that depend on each other in a cycle
    "derive/direction.py directions: read _(t+1), but is a forward state (read at t-1):": (
        "build",
        lambda: tiny(steps=((back, W_hh * back(t + 1) + W_hh * hidden(t + 1)), (hidden, forward_reading_back))),
    ),
    "derive/direction.py sweeps:": (
        "build",
        lambda: tiny(steps=((back, W_hh * back(t + 1) + W_hh * hidden(t - 1)), (hidden, forward_reading_back))),
    ),
    # derive/sweep_models.py: a model with reverse-time states as forward-only models, one per group of steps
    "derive/sweep_models.py _groups: the generated code cannot yet run a step that reads": (
        "numpy",
        lambda: tiny(
            steps=(
                (hidden, W_hx * x() + W_hh * hidden(t - 1)),
                (back, W_hh * back(t + 1) + W_hh * hidden()),
                (third, W_hh * third(t - 1) + W_hh * back() + W_hh * hidden(t - 1)),
            ),
            outputs=((o, W_qh * third()),),
        ),
    ),
    "derive/sweep_models.py _sweep_model: the generated code cannot stack the labels with the values": (
        "numpy",
        lambda: tiny(
            inputs=(words,),
            steps=(
                (hidden, tanh(W_hx * OneHot(words(), d) + W_hh * hidden(t - 1))),
                (back, tanh(W_hx * OneHot(words(), d) + W_hh * back(t + 1) + W_hh * hidden())),
            ),
            outputs=((o, W_qh * back()),),
        ),
    ),
    "derive/validation.py validate: :": (
        "build",
        lambda: tiny(steps=((back, W_hh * back(t + 1) + W_hh * hidden(t - 1)), (hidden, forward_reading_back))),
    ),
    "derive/validation.py _check_reference: : _t reads at time ; expected an input or": (
        "build",
        lambda: state(W_hx * x() + W_hh * hidden(t - 2)),
    ),
    # derive/models: loading a model file
    "derive/models/__init__.py _load_file: :():": (  # sequence() called in the model file: the file is named
        "load",
        lambda tmp: model_file(tmp, "def cell():\n    return sequence('x', 3, 'weird')\n"),
    ),
    "derive/models/__init__.py load: unknown model ; known models: (or give file.py:function)": (
        "load",
        lambda tmp: "no-such-model",
    ),
    "derive/models/__init__.py _load_file: model file (expected file.py:function)": (  # missing, or a folder
        "load",
        lambda tmp: f"{tmp / 'missing.py'}:cell",
    ),
    "derive/models/__init__.py load: expected file.py:function, got : it has the colon": (
        "load",
        lambda tmp: "cells.py:",  # or ":cell", no file
    ),
    "derive/models/__init__.py _load_file: model file called sys.exit() while loading": (
        "load",
        lambda tmp: model_file(tmp, "sys.exit(3)\n"),
    ),
    "derive/models/__init__.py _load_file: model file failed to load: :": (
        "load",
        lambda tmp: model_file(tmp, "1/0\n"),
    ),
    "derive/models/__init__.py _load_file: model file has no function": (
        "load",
        lambda tmp: model_file(tmp, "cell = 1\n"),
    ),
    "derive/models/__init__.py _load_file: model file : () called sys.exit()": (
        "load",
        lambda tmp: model_file(tmp, "def cell():\n    sys.exit(1)\n"),
    ),
    "derive/models/__init__.py _load_file: :() failed: :": (
        "load",
        lambda tmp: model_file(tmp, "def cell():\n    1/0\n"),
    ),
    "derive/models/__init__.py _load_file: :() returned , expected a bptt.derive.model.Model": (
        "load",
        lambda tmp: model_file(tmp, "def cell():\n    return 3\n"),
    ),
    # derive/blocks.py: a slice out of range, empty or reversed, refused as the user's function writes it
    "derive/blocks.py _slicing.sliced:": (
        "load",
        lambda tmp: model_file(tmp, "def cell():\n    h = sizes('h')\n    return matrix('W', h, h)[h:2*h, :]\n"),
    ),
    # derive/norms.py and reductions.py: a norm's or a reduction's arguments, refused as the user's function runs
    "derive/norms.py _eps: : eps must be a positive rational or 0, not": (
        "load",
        lambda tmp: norm_file(tmp, "layer_norm(x(), eps=-1)"),
    ),
    "derive/norms.py _column: : the must be a column of the input's rows,": (
        "load",
        lambda tmp: norm_file(tmp, "rms_norm(x(), gain=matrix('g', h, h))"),
    ),
    "derive/norms.py _norm: : the input must be a column vector, not": (
        "load",
        lambda tmp: norm_file(tmp, "layer_norm(matrix('W', h, h))"),
    ),
    "derive/reductions.py register_reduction.reduce: (v) reduces a column vector, not": (
        "load",
        lambda tmp: norm_file(tmp, "mean(matrix('W', h, h))"),
    ),
    # derive: nodes with no rule
    "derive/adjoint.py _apply:": ("derive", lambda: state(Apply("swish", W_hx * x() + W_hh * hidden(t - 1)))),
    "derive/adjoint.py _slice:": ("derive", lambda: state(tanh(W_hx * x() + W2[0 : 2 * h : 2, :] * hidden(t - 1)), W2)),
    "derive/adjoint.py _backprop: has no adjoint rule yet": (
        "latex",
        lambda: state(Clipped(W_hx * x() + W_hh * hidden(t - 1))),
    ),
    "derive/adjoint.py _power:": (
        "derive",
        lambda: state(sp.HadamardPower(W_hx * x() + W_hh * hidden(t - 1), sp.sqrt(2))),
    ),
    "derive/elementwise.py power: an elementwise power must have a non-zero exponent: v^0 is": (
        "numpy",
        lambda: state(sp.HadamardPower(W_hx * x(), 0) + W_hh * hidden(t - 1)),
    ),
    "derive/elementwise.py power: an elementwise power must have a rational exponent, not": (
        "latex",
        lambda: state(sp.HadamardPower(W_hx * x() + W_hh * hidden(t - 1), sp.sqrt(2))),
    ),
    "derive/tangent.py _power:": ("jax", lambda: unread(sp.HadamardPower(W_hx * x(), sp.sqrt(2)))),
    "derive/adjoint.py check_products:": (
        "numpy",
        lambda: state(tanh(W_hx * x() + hidden(t - 1) * hidden(t - 1).T * hidden(t - 1))),
    ),
    "derive/blocks.py check_block: the block has no adjoint rule: only a block of": (
        "derive",
        lambda: state(tanh(W_hx * x() + (W_hh.T * W_hh)[:h, :h] * hidden(t - 1))),
    ),
    "derive/blocks.py check_block: the block has no adjoint rule: a block takes": (
        "derive",
        lambda: state(tanh(W_hx * x() + W2[0 : 2 * h : 2, :] * hidden(t - 1)), W2),
    ),
    "derive/elementwise.py lookup: no derivative for the elementwise function (known: ; add one": (
        "derive",
        lambda: state(Apply("swish", W_hx * x() + W_hh * hidden(t - 1))),
    ),
    "derive/elementwise.py derivative: has no derivative registered (it is the slope of another": (
        "derive",
        lambda: state(Apply("gelu'", W_hx * x() + W_hh * hidden(t - 1))),
    ),
    "derive/tangent.py _slope:": ("numpy", lambda: unread(Apply("swish", W_hx * x()))),
    "derive/tangent.py tangent_terms.tangent: has no forward-mode rule yet": (
        "torch",
        lambda: unread(Clipped(W_hx * x())),
    ),
    # codegen/names.py: the API's words, torch's Module attributes, the namer's marker
    "codegen/names.py check: : is a word of the generated modules' API (their": (
        "numpy",
        lambda: tiny(sizes=(d, h, q, sp.Symbol("dtype"))),
    ),
    "codegen/names.py check: : holds , which codegen hides the model's names with": (
        "jax",
        lambda: state(W_hx * x() + W_hh * hidden(t - 1), matrix("WQzq", h, h)),
    ),
    "codegen/names.py check: : is the name of the initial value of the": (
        "torch",
        lambda: state(W_hx * x() + W_hh * hidden(t - 1), matrix(hidden.name + "0", h, h)),
    ),
    "codegen/names.py check: : the parameter would hide the attribute of the torch": (
        "torch",
        lambda: state(W_hx * x() + W_hh * hidden(t - 1), matrix("eval", h, h)),
    ),
    # codegen: nodes with no code
    "codegen/printing/printer.py RowPrinter.elementwise: "
    "the elementwise function has no code; add it with .register(,": (
        "numpy",
        with_function,
    ),
    "codegen/printing/facts.py model_facts:": ("torch", lambda: tiny(loss=GenericLoss(o(), y()))),
}

# Sites no model reaches, with a word of why: "invariant" (what the statements guarantee: every sequence a
# statement reads was validated), "caught" (the caller keeps the error as a value), "proofs" (the exact checks'
# own evaluator), "environment" (a framework not installed: not a model's refusal), "internal" (Python's
# protocol inside the printers).
INTERNAL = {
    "derive/direction.py forward_only:": (
        "reached by the app's commands that run what reverse states lack (check, bench, analyze, exercises): "
        "tests/app/test_cli_reverse_states.py"
    ),
    "codegen/printing/sweeps.py prefixed: a group's function binds , a name of its module": (
        "invariant: a generated module's functions bind no name its module binds"
    ),
    "codegen/backends.py Backend.module_source: laying the module out in columns changed its code": (
        "invariant: the layout only breaks lines (printing/columns.py); a guard against printing other code"
    ),
    "derive/flow.py _Transposed.__getitem__:": "a Mapping's KeyError for a pair of names that are not states",
    "derive/nodes.py __getattr__: module has no attribute": "a module's AttributeError for a name it does not define",
    "derive/model.py renamed: Model has no field": "invariant: codegen renames only a model's fields (namer.hide)",
    "codegen/namer.py Namer.rendering:": "re-raises a refusal of the hidden model in the model's names",
    "codegen/namer.py _fresh: unreachable: more spellings than names": "invariant",
    "codegen/namer.py _key_edits: namer: an f-string names a model's name, which the namer": (
        "invariant: the printers quote a name in a plain string"
    ),
    "codegen/renaming.py _Finder.walk: namer: an except clause binds": "invariant: no except clause binds a name",
    "codegen/renaming.py apply: namer: is not at line , column :": "invariant",
    "codegen/adapter.py Adapter.load:": "environment: a framework not installed (tests/app/test_toy_backend.py)",
    "codegen/adapter.py Adapter.installed:": "environment: a framework not installed (tests/app/test_toy_backend.py)",
    "codegen/backends.py _registered: the backend registered as () calls itself": (
        "environment: another package's entry point names an adapter of another name"
    ),
    "codegen/jax/printer.py scan_read: a step reads at time ; only t-1, t and": "invariant",
    "codegen/jax/scan.py PassPrinter.shift: the forward pass reads at time ; only t and": "invariant",
    "codegen/jax/scan.py PassPrinter.step_value: the forward loop reads at t before it assigns it": "invariant",
    "codegen/jax/scan.py PassPrinter.step_value: the forward loop reads at t-1, which holds steps 1..T": "invariant",
    "codegen/jax/scan.py PassPrinter.write: the forward pass writes , which is not one of": "invariant",
    "codegen/printing/printer.py RowPrinter._print_GenericLoss:": "invariant",  # model_facts refuses the loss first
    "codegen/printing/function_code.py Term.__getattr__:": "internal",
    "codegen/printing/function_code.py Library.__getattr__:": "internal",
    "codegen/printing/helpers.py Helpers.closure: the runtime files have no definition": "invariant",
    "codegen/printing/printer.py RowPrinter.sequence: holds one step; it cannot be read for all steps": "invariant",
    "codegen/printing/printer.py RowPrinter.sequence: cannot stack at time over t = 1..T": "invariant",
    "codegen/printing/printer.py RowPrinter.emptyPrinter: has no code yet": "invariant",
    "codegen/printing/products.py ProductPrinting.lookup: a one-hot vector must be multiplied by a parameter, not": (
        "invariant: derive/adjoint.py check_products refuses any other factor of a one-hot vector first"
    ),
    "codegen/printing/products.py ProductPrinting.apply:": (
        "invariant: derive/adjoint.py check_products refuses any other factor first, and codegen distributes sums"
    ),
    "codegen/printing/statements.py InPlacePrinter.gemm_matrix:": (
        "invariant: derive/adjoint.py check_products refuses any other factor first, and codegen distributes sums"
    ),
    "codegen/printing/tangents.py TangentPrinter.tangent: the forward-mode direction of must multiply a vector #2": (
        "invariant: a parameter's transpose is a factor before a vector (check_products)"
    ),
    "codegen/printing/products.py outer_factors: a parameter's gradient term must be a column times a": "invariant",
    "codegen/printing/tangents.py TangentPrinter.tangent: "
    "the forward-mode direction of must multiply a vector": "invariant",
    "codegen/printing/terms.py Scratch.take: too many scratch arrays in one statement": "invariant",
    "codegen/torch/backward.py fast_adjoints_body: the fast adjoints do not hold": "invariant",
    "codegen/torch/steps.py StepPrinter.sequence: a step function reads at , not as a step": "invariant",
    "codegen/torch/statements.py TorchStatements._print_Loop: a second loop: is taken": "invariant",
    "derive/closed_form.py linear_coefficient: is not a left multiple of": "caught",
    "derive/directional.py _form: a state's recursion reads another state's adjoint from another step": "caught",
    "derive/directional.py _form: the local term reads an adjoint from another step": "caught",
    "derive/closed_form.py closed_form: closed forms are derived for single-state cells": "caught",
    "derive/closed_form.py closed_form: the local term must depend on output adjoints only": "caught",
    "derive/closed_form.py block_closed_form: a block closed form is for cells with several states": "caught",
    "derive/closed_form.py block_closed_form: the local term must depend on output adjoints only": "caught",
    "derive/explicit.py explicit: cannot make explicit:": "proofs",
}
