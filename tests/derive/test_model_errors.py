"""Bad model descriptions and model files fail with a readable ModelError, and a
node without an adjoint rule fails with NoRule naming it."""

import re

import pytest
import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixExpr
from sympy.matrices.expressions.special import OneMatrix

from bptt.codegen.names import check as check_code_names
from bptt.derive import model as model_module
from bptt.derive.adjoint import NoRule, backprop
from bptt.derive.bptt import derive
from bptt.derive.model import ModelError, matrix, sequence
from bptt.derive.models import load, names
from bptt.derive.nodes import Apply, t
from bptt.tests.support.refusal_cells import W_hh, W_hx, W_qh, a, d, h, hidden, o, q, tiny, x


def raises(message):
    return pytest.raises(ModelError, match=re.escape(message))


def test_a_correct_description_is_accepted():
    """Positive control: the unchanged description builds and derives."""
    assert derive(tiny()).recursion(hidden) is not None


def test_no_state():
    with raises("model 'tiny': no state; a recurrent model needs a step with role 'state'"):
        tiny(steps=((a, W_hx * x()),), outputs=((o, W_qh * a()),))


def test_no_output():
    with raises("no output"):
        tiny(outputs=())


def test_loss_must_be_a_loss_node():
    with raises("loss must be a loss node"):
        tiny(loss=o())


def test_non_state_read_at_previous_step():
    """Only states carry over from t-1; an input read at t-1 is refused."""
    with raises("h_t reads x_(t-1), but only states may be read at t-1"):
        tiny(steps=((hidden, W_hx * x(t - 1) + W_hh * hidden(t - 1)),))


def test_read_from_the_future():
    """Only a state may be read at t+1 (a reverse-time state); an input may not."""
    with raises("h_t reads x_(t+1), but only states may be read at t+1"):
        tiny(steps=((hidden, W_hx * x(t + 1) + W_hh * hidden(t - 1)),))


def test_output_rows_mismatch():
    """o has q rows but W_hh h_t has h."""
    with raises("o_t has q rows but its right-hand side has shape (h, 1)"):
        tiny(outputs=((o, W_hh * hidden()),))


def test_inner_shape_mismatch():
    """W (h x q) times x_t (d x 1): SymPy accepts it with symbolic sizes, validate() must not."""
    W_bad = matrix("W_bad", h, q)
    with pytest.raises(ModelError, match=r"equation of h_t, W_bad \(h x q\) times .*inner sizes differ"):
        tiny(params=(W_bad, W_hh, W_qh), steps=((hidden, W_bad * x() + W_hh * hidden(t - 1)),))


def test_parameter_missing_from_params():
    with raises("W_hh in the equation of h_t is not a parameter"):
        tiny(params=(W_hx, W_qh))


def test_unknown_role():
    with raises("role must be one of input, state"):
        sequence("z", d, "hidden")


def test_unknown_zoo_name_lists_the_zoo():
    with pytest.raises(ModelError, match="unknown model 'lsmt'") as error:
        load("lsmt")
    for name in names():
        assert name in str(error.value)


def write(tmp_path, text):
    path = tmp_path / "user_model.py"
    path.write_text(text)
    return path


def test_model_file_is_loaded(tmp_path):
    """Positive control: a file whose function returns a Model loads."""
    path = write(tmp_path, "from bptt.derive.models.linear import linear\n\ndef make():\n    return linear()\n")
    assert load(f"{path}:make").name == "linear"


def test_model_file_missing(tmp_path):
    with raises("does not exist"):
        load(f"{tmp_path / 'absent.py'}:make")


def test_model_file_syntax_error(tmp_path):
    path = write(tmp_path, "def make(:\n    pass\n")
    with raises("failed to load: SyntaxError"):
        load(f"{path}:make")


def test_model_file_lacks_the_function(tmp_path):
    path = write(tmp_path, "def other():\n    pass\n")
    with raises("has no function 'make'"):
        load(f"{path}:make")


def test_model_file_returns_something_else(tmp_path):
    path = write(tmp_path, "def make():\n    return {'name': 'linear'}\n")
    with raises("make() returned dict, expected a bptt.derive.model.Model"):
        load(f"{path}:make")


def test_model_file_function_fails(tmp_path):
    path = write(tmp_path, "def make():\n    raise RuntimeError('no weights here')\n")
    with raises("make() failed: RuntimeError: no weights here"):
        load(f"{path}:make")


def test_model_file_with_a_bad_description(tmp_path):
    """A ModelError raised while building the model reaches the user unchanged."""
    path = write(
        tmp_path,
        "from bptt.derive.model import Model, matrix, sequence, sizes\n"
        "from bptt.derive.nodes import SquaredError\n\n"
        "def make():\n"
        "    n = sizes('n')\n"
        "    x, o, y = sequence('x', n, 'input'), sequence('o', n, 'output'), sequence('y', n, 'target')\n"
        "    V = matrix('V', n, n)\n"
        "    return Model('stateless', '', '', (n,), (V,), (x,), (), ((o, V * x()),), SquaredError(o(), y()))\n",
    )
    with raises("model 'stateless': no state"):
        load(f"{path}:make")


class Mystery(MatrixExpr):
    """A matrix node derive.adjoint has never heard of."""

    arg = property(lambda self: self.args[0])
    shape = property(lambda self: self.args[0].shape)


def test_no_rule_for_an_unknown_node():
    with pytest.raises(NoRule, match=re.escape("Mystery(W_hh h_{t-1}) has no adjoint rule yet")):
        backprop(Mystery(W_hh * hidden(t - 1)), hidden())


def test_no_rule_reaches_derive():
    """An unknown node in a step equation stops the derivation, naming the node."""
    model = tiny(steps=((hidden, W_hx * x() + Mystery(W_hh * hidden(t - 1))),))
    with pytest.raises(NoRule, match=re.escape("model 'tiny', in h_t = W_hx x_t + Mystery(W_hh h_{t-1}): Mystery(")):
        derive(model)


def test_no_rule_for_an_unknown_elementwise_function():
    with pytest.raises(NoRule, match="'swish'"):
        backprop(Apply("swish", W_hh * hidden(t - 1)), hidden())


@pytest.mark.parametrize(
    "rhs, named",
    [(lambda: sp.exp(W_hh * hidden(t - 1)), "exp()"), (lambda: sp.Abs(W_hh * hidden(t - 1)), "Abs or sqrt()")],
    ids=["exp", "Abs"],
)
def test_sympy_scalar_functions_of_vectors_are_refused_with_the_registry_named(rhs, named):
    with raises(f"SymPy's {named} is a scalar function") as caught:
        tiny(steps=((hidden, rhs()),))
    assert "bptt.derive.elementwise" in str(caught.value) and "relu" in str(caught.value)


def test_a_scalar_in_a_sum_with_a_sequence_value_or_a_function_is_that_scalar_times_ones():
    """`1 - z_t` and `tanh(a_t) + 1` read as the maths does (a bare W h_{t-1} is SymPy's MatMul: not covered)."""
    ones = OneMatrix(h, 1)
    model = tiny(steps=((a, W_hh * hidden(t - 1)), (hidden, 1 - Apply("tanh", a()))))
    assert model.steps[1][1] == ones - Apply("tanh", a())
    assert (1 - a()) == ones - a() and (a() + 1) == a() + ones and (a() - 2) == a() - 2 * ones


def test_torch_parameter_names_are_accepted_and_only_real_clashes_refused():
    """torch's GRU calls its weights W_in, b_in: usable; so is `a_in` beside a step named a (the namer gives the
    code's input projection another spelling); a parameter named as torch's Module attribute is refused."""
    W_in, b_in = matrix("W_in", h, d), matrix("b_in", h, 1)
    model = tiny(params=(W_in, b_in, W_hh, W_qh), steps=((hidden, W_in * x() + b_in + W_hh * hidden(t - 1)),))
    assert [p.name for p in model.params] == ["W_in", "b_in", "W_hh", "W_qh"]
    check_code_names(model)
    a_in = matrix("a_in", h, d)
    clash = tiny(params=(a_in, W_hh, W_qh), steps=((a, a_in * x()), (hidden, a() + W_hh * hidden(t - 1))))
    check_code_names(clash)
    with raises("the parameter 'eval' would hide the attribute 'eval' of the torch backend's Model"):
        check_code_names(tiny(params=(matrix("eval", h, d), W_hh, W_qh), steps=((hidden, W_hh * hidden(t - 1)),)))


def test_sympy_max_of_a_vector_in_a_model_file_names_relu(tmp_path):
    path = write(
        tmp_path,
        "import sympy as sp\n"
        "from bptt.derive.model import matrix, sequence, sizes\n\n"
        "def make():\n"
        "    d, h = sizes('d h')\n"
        "    return sp.Max(matrix('W', h, d) * sequence('x', d, 'input')(), 0)\n",
    )
    with raises("use relu from bptt.derive.nodes"):
        load(f"{path}:make")


def test_a_user_model_remembers_the_spec_that_reproduces_it(tmp_path):
    """Headers of generated files give the command that regenerates them: path.py:function for a user's file."""
    path = write(tmp_path, "from bptt.derive.models.linear import linear\n\ndef make():\n    return linear()\n")
    assert load(f"{path}:make").command_name == f"{path}:make"
    assert load("linear").command_name == "linear"


def test_a_models_sequences_are_remembered_per_model_and_read_anew_for_another():
    """Model.sequences() remembers its walk of the equations (derive/model.py): the walk's own answer for each zoo
    model, asked twice, in turn."""
    models = [load(name) for name in ("gru", "lstm-peephole", "gru")]
    for model in models + models:
        assert model.sequences() == model_module._first_sequences.__wrapped__(model)
    assert {s.name for s in models[0].sequences()} != {s.name for s in models[1].sequences()}
