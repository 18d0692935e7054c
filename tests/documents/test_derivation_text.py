"""The derivations reproduce the textbook formulas of the seeds, in the printer's
notation: bold vectors and matrices, \\textrm subscripts, ^\\top, \\odot 2,
\\operatorname{diag}. The expected strings are the seeds' formulas written by
hand in that notation; structural tests below do not depend on printing. Long
equations are broken into lines from their structure: tests at the end."""

import pytest
import sympy as sp
from sympy.matrices.expressions.special import OneMatrix

from bptt.derive.bptt import derive
from bptt.derive.elementwise import Apply
from bptt.derive.models import load, names
from bptt.derive.nodes import Adj, Diag, OneHot, SeqAt, Softmax, T, TimeSum, t
from bptt.derive.text import text
from bptt.derive.truncation import Xi, chunked, randomized
from bptt.documents.equation import equation as make_equation
from bptt.documents.latex import latex
from bptt.documents.linebreak import BUDGET, CALLS, FACTORS, PLAIN, lines, pieces
from bptt.documents.render import document
from bptt.documents.width import width
from bptt.tests.support.printed import GROUP, shown

DL = r"\frac{\partial L}{\partial "  # followed by the variable and "}"
XDIST_GROUP = GROUP  # the documents of shown() are built once for the modules that read them


def equations(name):
    """Every (lhs, rhs) pair the derivation document shows."""
    return [(e.lhs, e.rhs) for section in shown(name) for e in section.equations]


# Seed 000 (d2l 9.7 / zh 6.6), the seven results, with y_t a target vector.
LINEAR = {
    "dL/do_t = 1/T dl/do_t": (
        DL + r"\mathbf{o}_{t}}",
        r"\frac{1}{T} \frac{\partial l\left(\mathbf{o}_{t}, \mathbf{y}_{t}\right)}{\partial \mathbf{o}_{t}}",
    ),
    "dL/dW_qh = sum dL/do_t h_t^T": (
        DL + r"\mathbf{W}_\textrm{qh}}",
        r"\sum_{t=1}^{T} " + DL + r"\mathbf{o}_{t}} \mathbf{h}_{t}^\top",
    ),
    "dL/dh_T = W_qh^T dL/do_T": (
        DL + r"\mathbf{h}_{T}}",
        r"\mathbf{W}_\textrm{qh}^\top " + DL + r"\mathbf{o}_{T}}",
    ),
    "recursion": (
        DL + r"\mathbf{h}_{t}}",
        r"\mathbf{W}_\textrm{hh}^\top "
        + DL
        + r"\mathbf{h}_{t+1}} + \mathbf{W}_\textrm{qh}^\top "
        + DL
        + r"\mathbf{o}_{t}}",
    ),
    "closed form": (
        DL + r"\mathbf{h}_{t}}",
        r"\sum_{i=t}^{T} \left(\mathbf{W}_\textrm{hh}^\top\right)^{T-i} \mathbf{W}_\textrm{qh}^\top "
        + DL
        + r"\mathbf{o}_{T+t-i}}",
    ),
    "dL/dW_hx = sum dL/dh_t x_t^T": (
        DL + r"\mathbf{W}_\textrm{hx}}",
        r"\sum_{t=1}^{T} " + DL + r"\mathbf{h}_{t}} \mathbf{x}_{t}^\top",
    ),
    "dL/dW_hh = sum dL/dh_t h_{t-1}^T": (
        DL + r"\mathbf{W}_\textrm{hh}}",
        r"\sum_{t=1}^{T} " + DL + r"\mathbf{h}_{t}} \mathbf{h}_{t-1}^\top",
    ),
}

# diag(1 - h_t^2): the derivative of tanh written with the output, as the seed does.
DIAG = r"\operatorname{diag}\left(\mathbf{1} - \mathbf{h}_{t}^{\odot 2}\right)"
DIAG_NEXT = r"\operatorname{diag}\left(\mathbf{1} - \mathbf{h}_{t+1}^{\odot 2}\right)"

# Seed 001, section 2.1 (Goodfellow et al. 10.2.2), with tau -> T and nabla_v L -> dL/dv.
ELMAN = {
    "dL/ds_t = o_t - onehot(y_t)": (
        DL + r"\mathbf{s}_{t}}",
        r"\mathbf{o}_{t} - \operatorname{onehot}\left(y_{t}\right)",
    ),
    "dL/dh_T = V^T dL/ds_T": (
        DL + r"\mathbf{h}_{T}}",
        r"\mathbf{V}^\top " + DL + r"\mathbf{s}_{T}}",
    ),
    # The seed prints W^T (dL/dh_{t+1}) diag(1 - h_{t+1}^2): the diag on the wrong
    # side of the adjoint (an h x 1 vector times an h x h matrix), a known erratum.
    # (dh_{t+1}/dh_t)^T = (diag(1 - h_{t+1}^2) W)^T = W^T diag(1 - h_{t+1}^2).
    "recursion": (
        DL + r"\mathbf{h}_{t}}",
        r"\mathbf{W}^\top " + DIAG_NEXT + " " + DL + r"\mathbf{h}_{t+1}} + \mathbf{V}^\top " + DL + r"\mathbf{s}_{t}}",
    ),
    "dL/dc = sum dL/ds_t": (DL + r"\mathbf{c}}", r"\sum_{t=1}^{T} " + DL + r"\mathbf{s}_{t}}"),
    "dL/dV = sum dL/ds_t h_t^T": (
        DL + r"\mathbf{V}}",
        r"\sum_{t=1}^{T} " + DL + r"\mathbf{s}_{t}} \mathbf{h}_{t}^\top",
    ),
    "dL/db = sum diag(1 - h_t^2) dL/dh_t": (
        DL + r"\mathbf{b}}",
        r"\sum_{t=1}^{T} " + DIAG + " " + DL + r"\mathbf{h}_{t}}",
    ),
    "dL/dW = sum diag(1 - h_t^2) dL/dh_t h_{t-1}^T": (
        DL + r"\mathbf{W}}",
        r"\sum_{t=1}^{T} " + DIAG + " " + DL + r"\mathbf{h}_{t}} \mathbf{h}_{t-1}^\top",
    ),
    "dL/dU = sum diag(1 - h_t^2) dL/dh_t x_t^T": (
        DL + r"\mathbf{U}}",
        r"\sum_{t=1}^{T} " + DIAG + " " + DL + r"\mathbf{h}_{t}} \mathbf{x}_{t}^\top",
    ),
}


@pytest.mark.parametrize("result", list(LINEAR))
def test_linear_reproduces_d2l(result):
    """Each of d2l's seven BPTT results appears in the derivation document."""
    shown = equations("linear")
    assert LINEAR[result] in shown, f"{result}: expected\n  {LINEAR[result]}\nnot among\n" + "\n".join(map(str, shown))


@pytest.mark.parametrize("result", list(ELMAN))
def test_elman_reproduces_goodfellow(result):
    """Each of the seed's section 2.1 results appears in the derivation document."""
    shown = equations("elman")
    assert ELMAN[result] in shown, f"{result}: expected\n  {ELMAN[result]}\nnot among\n" + "\n".join(map(str, shown))


def test_linear_structure():
    """The linear derivation as SymPy objects, independent of the printer."""
    model = load("linear")
    W_hx, W_hh, W_qh = model.params
    h, o = model.states[0], model.outputs[0][0]
    derivation = derive(model)
    assert derivation.recursion(h) == W_hh.T * Adj(h(t + 1)) + W_qh.T * Adj(o(t))
    assert derivation.terminal(h) == W_qh.T * Adj(o(T))
    assert derivation.initial(h) == W_hh.T * Adj(h(1))
    assert derivation.param_gradient(W_hx) == TimeSum(Adj(h(t)) * model.inputs[0](t).T, t, 1, T)
    assert derivation.param_gradient(W_hh) == TimeSum(Adj(h(t)) * h(t - 1).T, t, 1, T)
    assert derivation.param_gradient(W_qh) == TimeSum(Adj(o(t)) * h(t).T, t, 1, T)
    concrete = derive(model, loss=model.concrete_loss())
    y = model.concrete_loss().target
    assert concrete.output_adjoints[o] == (o(t) - y) / T


def test_elman_structure():
    """The elman derivation as SymPy objects: diag sits between W^T and dL/dh_{t+1}."""
    model = load("elman")
    U, W, V, b, c = model.params
    h, s = model.states[0], model.outputs[0][0]
    derivation = derive(model)
    diag = Diag(OneMatrix(*h(t).shape) - sp.HadamardPower(h(t), 2))
    assert derivation.output_adjoints[s] == Softmax(s(t)) - OneHot(model.concrete_loss().target, s(t).shape[0])
    assert derivation.terminal(h) == V.T * Adj(s(T))
    assert derivation.recursion(h) == W.T * diag.subs(t, t + 1) * Adj(h(t + 1)) + V.T * Adj(s(t))
    assert derivation.param_gradient(b) == TimeSum(diag * Adj(h(t)), t, 1, T)
    assert derivation.param_gradient(U) == TimeSum(diag * Adj(h(t)) * model.inputs[0](t).T, t, 1, T)
    assert derivation.param_gradient(W) == TimeSum(diag * Adj(h(t)) * h(t - 1).T, t, 1, T)
    assert derivation.param_gradient(V) == TimeSum(Adj(s(t)) * h(t).T, t, 1, T)
    assert derivation.param_gradient(c) == TimeSum(Adj(s(t)), t, 1, T)


def test_seed_erratum_order_is_not_a_matrix_product():
    """The seed's W^T (dL/dh_{t+1}) diag(...) is ill-formed once sizes are concrete;
    the derived W^T diag(...) dL/dh_{t+1} is an h-vector."""
    model = load("elman")
    W, h = model.params[1], model.states[0]
    sizes = {n: k for n, k in zip(model.sizes, (2, 3, 4), strict=True)}
    diag = Diag(OneMatrix(*h(t + 1).shape) - sp.HadamardPower(h(t + 1), 2))
    adjoint = Adj(h(t + 1))
    derived = (W.T * diag * adjoint).xreplace(sizes)
    assert derived.shape == (sizes[h.rows], 1)
    with pytest.raises(sp.ShapeError):
        sp.MatMul(W.T, adjoint, diag).xreplace(sizes).doit()


ZOO = tuple(names())


def displayed(name):
    """Every Equation of a zoo model's derivation document."""
    return [e for section in shown(name) for e in section.equations]


def printed_expressions(name):
    """The expressions a derivation document prints from the derivation."""
    model = load(name)
    derivation = derive(model, named="textbook")
    out = [derivation.param_gradient(p) for p in model.params]
    out += [derivation.intermediate(seq) for seq in model.intermediates]
    for seq in derivation.states:
        out += [derivation.recursion(seq), derivation.terminal(seq), derivation.initial(seq)]
        out += [chunked(derivation, seq), randomized(derivation, seq)]
    return out


def undecorated(line):
    """A broken line without what the break adds: the \\left. and \\right. that pair its parentheses, the {}
    that keeps a leading operator binary (the \\cdot that starts a line broken between factors, the last resort)."""
    return line.replace(r"\left. ", "").replace(r" \right.", "").replace("{}", "").removeprefix(r"\cdot ")


@pytest.mark.parametrize("name", ZOO)
def test_pieces_join_to_the_one_line_print(name):
    """Cutting an expression into pieces changes nothing: joined with their glue they are its LaTeX."""
    for expr in printed_expressions(name):
        assert "".join(piece.glue + piece.text for piece in pieces(expr)) == latex(expr)


@pytest.mark.parametrize("name", ZOO)
def test_an_equation_breaks_only_when_it_does_not_fit(name):
    """An equation is one line when its estimated width fits the budget beside the widest left-hand side of
    its display; broken, each of its lines fits there, and the lines joined are the one-line right-hand side."""
    for display in (d for section in shown(name) for d in section.displays):
        beside = max(width(eq.lhs) for eq in display.equations)
        for equation in display.equations:
            one_line = width(f"{equation.lhs} = {equation.rhs}") - width(equation.lhs) + beside
            assert bool(equation.lines) == (one_line > BUDGET), f"{one_line:.0f}pt: {equation.rhs}"
            for line in equation.lines:
                assert width(undecorated(line)) <= BUDGET - beside - width(r"\quad"), line
            assert " ".join(undecorated(line) for line in equation.lines) in ("", equation.rhs)


def test_a_line_never_breaks_inside_a_product_and_starts_with_its_operator():
    """Every continuation line of every zoo document starts with the sign of the term it continues, outside
    every parenthesis: none starts with a factor of a product, nor inside a diag(...) (the last resort of a
    user's cell too long for the page)."""
    for name in ZOO:
        for equation in displayed(name):
            for line in equation.lines[1:]:
                assert line.startswith(("{}+ ", "{}- ")), (name, line)


def test_a_long_sum_breaks_between_its_terms():
    """The GRU's transposed Jacobian A_k, four terms, breaks before a '+' or '-', outside any parentheses."""
    [jacobian] = [e for e in displayed("gru") if e.lhs == r"\mathbf{A}_{k}"]
    first, *rest = jacobian.lines
    assert rest, "A_k of the GRU fits one line: nothing tested"
    assert all(line.startswith(("{}+ ", "{}- ")) for line in rest), rest
    assert r"\right." not in "".join(jacobian.lines)


def test_a_long_product_is_never_broken_between_its_factors():
    """A product too long for a line, a chain of diag factors: never broken between two factors. Its run of
    diag factors is written as one diag of their odot product, diag(a) diag(b) = diag(a odot b), whose lines
    break before an odot; the product is the same matrix."""
    n = sp.Symbol("n")
    vectors = [SeqAt(name, t, n, "intermediate") for name in "abcdefghijklmnopqrstuvw"]
    x = SeqAt("x", t, n, "input")
    product = sp.MatMul(*map(Diag, vectors), x)
    assert lines(product, "y") == (latex(product),)  # no place to break: the factors stay on one line
    equation_ = make_equation("y", product)
    merged = sp.MatMul(Diag(sp.HadamardProduct(*vectors)), x)
    assert equation_.expr == merged and equation_.rhs == latex(merged)
    assert len(equation_.lines) > 1
    assert all(undecorated(line).startswith(r"\odot ") for line in equation_.lines[1:]), equation_.lines
    assert " ".join(undecorated(line) for line in equation_.lines) == latex(merged)


def test_a_sum_in_parentheses_breaks_inside_them():
    """xi_{t+1} (a sum too long for a line) + a term: the line breaks inside the parentheses, closes them
    with \\right. and the next line reopens them with \\left., so that every line pairs its \\left and \\right."""
    n = sp.Symbol("n")
    h = SeqAt("h", t + 1, n, "state")
    inner = sp.MatAdd(
        *(
            sp.MatrixSymbol(f"W_{gate}", n, n).T * Diag(SeqAt(gate, t + 1, n, "intermediate")) * Adj(h)
            for gate in "ifgoabc"
        )
    )
    expr = sp.MatAdd(Xi(t + 1) * inner, sp.MatrixSymbol("V", n, n).T * Adj(SeqAt("s", t, n, "output")))
    broken = lines(expr, latex(Adj(h.subs(t, t - 1))))
    assert len(broken) > 1
    assert broken[0].endswith(r" \right.") and broken[1].startswith(r"\left. {}+ ")
    assert all(line.count(r"\left") == line.count(r"\right") for line in broken), broken
    assert " ".join(undecorated(line) for line in broken) == latex(expr)


def test_the_closed_form_uses_the_named_jacobian():
    """The Jacobian A_k is displayed, and the closed form's ordered product is written with its name."""
    shown = equations("elman")
    assert (
        r"\mathbf{A}_{k}",
        r"\mathbf{W}^\top \operatorname{diag}\left(\mathbf{1} - \mathbf{h}_{k}^{\odot 2}\right)",
    ) in shown
    closed = (
        DL + r"\mathbf{h}_{t}}",
        (
            r"\sum_{j=t}^{T} \left(\mathbf{A}_{t+1} \mathbf{A}_{t+2} \cdots \mathbf{A}_{j}\right) \mathbf{V}^\top "
            + DL
            + r"\mathbf{s}_{j}}"
        ),
    )
    assert closed in shown


def test_long_lists_of_equations_are_named_in_the_text():
    """A sentence names the consumer equations when written out they would take more than a line of text."""
    [recursion] = [e for e in displayed("gru") if e.why.startswith("For $t < T$")]
    assert recursion.why.startswith(
        r"For $t < T$, by the chain rule through the equations of $\bar{\mathbf{r}}_{t+1}$, "
    )
    assert " = " not in recursion.why
    [short] = [e for e in displayed("elman") if e.why.startswith("For $t < T$")]
    assert r"$\mathbf{s}_{t} = \mathbf{c} + \mathbf{V} \mathbf{h}_{t}$" in short.why


def test_a_transposed_power_has_one_superscript():
    """dL/dP = sum_t dL/da_t (sigmoid(z_t)^(-1))^T for a term P sigmoid(z_t)^(-1) (a random cell's): SymPy moves the
    transpose inside the power, and a ^\\top followed by ^{\\odot -1} stopped pdflatex ("Double superscript")."""
    power = sp.HadamardPower(Apply("sigmoid", SeqAt("z2", t, sp.Symbol("h"), "intermediate")), -1)
    printed = r"\left(\sigma\left({\mathbf{z}^{(2)}}_{t}\right)^{\odot -1}\right)^\top"
    assert latex(power.T) == latex(sp.Transpose(power)) == printed
    for reach in (PLAIN, CALLS, FACTORS):  # a long line is broken into these pieces
        assert "".join(piece.glue + piece.text for piece in pieces(power.T, reach)).strip() == printed


def test_a_power_of_a_product_or_sum_keeps_its_parentheses():
    """(U x_t)^{odot 3} is the power of the product, not U (x_t^{odot 3}): both the LaTeX and the generated code's
    comments put a base that is not one symbol or one call in parentheses (once printed U x_t^{odot 3}); a symbol,
    a sequence value or a call stays bare."""
    d, h = sp.symbols("d h")
    U, W = sp.MatrixSymbol("U", h, d), sp.MatrixSymbol("W", h, h)
    x, a = SeqAt("x", t, d, "input"), SeqAt("a", t, h, "intermediate")
    cases = [
        (sp.HadamardPower(U * x, 3), r"\left(\mathbf{U} \mathbf{x}_{t}\right)^{\odot 3}", "(U x_t)^3"),
        (sp.HadamardPower(W.T * a, -1), r"\left(\mathbf{W}^\top \mathbf{a}_{t}\right)^{\odot -1}", "(W^T a_t)^(-1)"),
        (sp.HadamardPower(2 * a, 2), r"\left(2 \mathbf{a}_{t}\right)^{\odot 2}", "(2 a_t)^2"),
        (sp.HadamardPower(sp.HadamardProduct(a, a) + OneMatrix(h, 1), sp.Rational(1, 3)), None, None),
        (sp.HadamardPower(a, 3), r"\mathbf{a}_{t}^{\odot 3}", "a_t^3"),
        (sp.HadamardPower(Apply("tanh", a), 2), r"\tanh\left(\mathbf{a}_{t}\right)^{\odot 2}", "tanh(a_t)^2"),
    ]
    for power, tex, plain in cases:
        if tex is not None:
            assert latex(power) == tex
            assert text(power) == plain
        base_tex, base_plain = latex(power.base), text(power.base)
        assert latex(power).startswith(rf"\left({base_tex}\right)") == (" " in base_tex.replace(r"\left(", "("))
        assert text(power).startswith(f"({base_plain})") == (" " in base_plain)


def test_a_norms_statistics_are_subscripted_with_the_symbol_of_their_value():
    """mu_a1_in and sigma_a1_in (the mean and deviation of a norm's input a1_in) print with that input's symbol below
    them, as it prints itself; the name a1_in, its underscore escaped, reached lstm-layernorm's document."""
    value = latex(SeqAt("a1_in", t, sp.Symbol("h"), "intermediate"))
    assert value == r"{\mathbf{a}^{(1)}}_{\textrm{in},t}"
    sigma = latex(SeqAt("sigma_a1_in", t, 1, "intermediate"))
    assert sigma == r"\boldsymbol{\sigma}_{{\mathbf{a}^{(1)}}_\textrm{in},t}"
    body = document(load("lstm-layernorm"), "tex").partition(r"\begin{document}")[2]
    assert r"\boldsymbol{\mu}_{{\mathbf{a}^{(2)}}_\textrm{in},t}" in body


@pytest.mark.parametrize("name", names())
def test_no_name_with_an_escaped_underscore_reaches_a_zoo_document(name):
    """A name's underscore is a subscript, an accent or a norm's statistic of a value, never printed: a1\\_in (a norm's
    input, under its mean) and h\\_f (birnn's state, over its Jacobian A^{hf}) once were."""
    body = document(load(name), "tex").partition(r"\begin{document}")[2]
    assert r"\_" not in body, body[body.index(r"\_") - 200 : body.index(r"\_") + 50]
