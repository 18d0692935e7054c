"""What the documents say is right for the model they are about (issue 16, items 2, 4 and 5): a cut path
is said in words, teacher forcing's gradients read the data the code reads, a Jacobian's form is computed
from the derivation, a gate is spoken of only where there is one, terms are defined before they are used,
one symbol has one meaning, products show their order, and no code name appears in the prose."""

import re

import pytest
import sympy as sp

from bptt.derive.model import Model, matrix, sequence, sizes, vector
from bptt.derive.models import load, names
from bptt.derive.nodes import SeqAt, SquaredError, t, tanh
from bptt.documents.document import sections
from bptt.documents.latex import latex
from bptt.tests.support.printed import GROUP, shown, shown_document
from bptt.tests.support.user_cells import mgu

ZOO = tuple(names())
XDIST_GROUP = GROUP  # the documents of shown() are built once for the modules that read them


def prose(name):
    """Every sentence of a zoo document: the sections' texts, the sentences before displays, tables, captions."""
    out = []
    for section in shown(name):
        out.append(section.text)
        out += [getattr(item, "why", "") or getattr(item, "caption", "") for item in section.items]
        out += [getattr(item, "after", "") for item in section.items]
    return " ".join(out)


@pytest.mark.parametrize("name", ZOO)
def test_no_code_names_in_the_prose(name):
    text = prose(name).lower()
    for code in ("clip_grads", "clip\\_grads", "generated module", "generated code", "bptt analyze", "scatter"):
        assert code not in text, (name, code)


@pytest.mark.parametrize("name", ["jordan", "elman-jordan"])
def test_a_cut_path_is_said_in_words_not_displayed(name):
    """Teacher forcing's cut term is a sentence; the only adjoint of the forced output shown is its initial one."""
    (forcing,) = [s for s in shown(name) if s.name == "forcing"]
    o = load(name).states[-1] if name == "jordan" else load(name).states[1]
    assert "the term is cut" in forcing.text
    assert [eq.lhs for eq in forcing.equations] == [rf"\frac{{\partial L}}{{\partial {latex(o(0))}}}"]


@pytest.mark.parametrize("name", ["jordan", "elman-jordan"])
def test_teacher_forcing_gradients_read_the_data_the_code_reads(name):
    """dL/dR: step 1 reads the given o_0, every later step onehot(y_{t-1}), never the softmax o_{t-1}."""
    (gradient,) = [eq for eq in shown(name, ("parameters",))[0].equations if eq.lhs.endswith(r"\mathbf{R}}")]
    assert r"\mathbf{o}_{0}^\top + \sum_{t=2}^{T}" in gradient.rhs
    assert gradient.rhs.endswith(r"\operatorname{onehot}\left(y_{t-1}\right)^\top")
    assert r"\mathbf{o}_{t-1}" not in gradient.rhs


def test_a_model_without_recursion_claims_nothing_it_lacks():
    """jordan has no product of Jacobians, no closed form and no carried tangent, and says none of them."""
    text = prose("jordan")
    for claim in ("the product above", "product of Jacobians", "closed form", "tangents of the state", "|\\theta|"):
        assert claim not in text, claim
    assert "nothing is carried from one step to the next" in text
    assert [s.name for s in shown("jordan")][-2:] == ["forward", "source"]  # no lemma


def test_a_jacobians_form_is_read_off_the_derivation():
    """torch's LSTM: dc_k/dc_{k-1} is diag(f_k) and nothing else; with peepholes it also holds sigma's slope and
    p_i, p_f, and the document says so instead of calling it diag(f_k)."""
    lstm, peephole = prose("lstm"), prose("lstm-peephole")
    assert r"through the diagonal $\operatorname{diag}\left(\mathbf{f}_{k}\right)$, and nothing else" in lstm
    assert (
        "which hold the slope of $\\sigma$ and the parameters $\\mathbf{p}_\\textrm{i}$ and $\\mathbf{p}_\\textrm{f}$"
        in peephole
    )
    assert "and nothing else" not in peephole


def carried_by_a_tanh():
    """c_t = c_{t-1} * a_t with a_t = tanh(W x_t): a diagonal path whose factor is no gate."""
    d, h, q = sizes("d h q")
    x, a, c = sequence("x", d, "input"), sequence("a", h, "intermediate"), sequence("c", h, "state")
    W, V, b = matrix("W", h, d), matrix("V", q, h), vector("b", h)
    s, y = sequence("s", q, "output"), sequence("y", q, "target")
    steps = ((a, tanh(W * x() + b)), (c, sp.HadamardProduct(c(t - 1), a())))
    return Model(
        "carried", "carried", "a test", (d, h, q), (W, b, V), (x,), steps, ((s, V * c()),), SquaredError(s(), y())
    )


def test_a_gate_is_spoken_of_only_where_there_is_one():
    """The GRU's carousel factor is its gate z_k; no document speaks of a forget gate (the LSTM's source line
    aside), and a factor computed by a tanh is no gate."""
    assert "Here the factor is the gate $\\mathbf{z}_{k}$" in prose("gru")
    assert "Here the factor is the gate $\\mathbf{f}_{k}$" in prose("lstm")
    for name in ZOO:
        assert "forget gate" not in prose(name), name
    (flow,) = [s for s in sections(carried_by_a_tanh()) if s.name == "flow"]
    text = " ".join(f"{item.why} {item.after}" for item in flow.items)
    assert "constant error carousel" in text and "gate" not in text


@pytest.mark.parametrize("only", [None, ("backward",), ("parameters", "flow"), ("forward",)])
def test_adjoint_is_defined_where_it_is_first_used(only):
    text = shown_document("elman", "md", only)
    body = "\n".join(line for line in text.splitlines()[1:] if not line.startswith("## "))  # not the titles
    assert body.index("adjoint") == body.index("The adjoint of a value $v$ is") + len("The ")


def test_truncations_symbols_are_defined_before_they_are_used():
    (truncation,) = shown("elman", ("truncation",))
    text = truncation.text
    assert text.index("$\\tau$ steps ($\\tau \\ge 1$ an integer)") < text.index("$\\tau \\ge T$")
    assert text.index("probability $\\pi$") < text.index("$\\pi = 1$")
    (chunk,) = [d for d in truncation.displays if r"\nmid" in d.rows[0]]
    assert "$[\\tau \\nmid t]$ is 1 when $\\tau$ does not divide $t$ and 0 when it does" in chunk.why


def test_chunks_keep_the_initial_states_gradient():
    """The code detaches the state entering each chunk after the first, and gives h_0 its gradient: the sentence
    says so, rather than letting [tau does not divide 0] = 0 suggest that dL/dh_0 is cut."""
    (truncation,) = shown("elman", ("truncation",))
    (chunk,) = [d for d in truncation.displays if r"\nmid" in d.rows[0]]
    assert "dropped where $\\tau$ divides $t \\ge 1$, and the given initial state keeps its gradient" in chunk.why


def test_a_bound_is_loose_through_activations_only_where_there_are_some():
    """The linear RNN has no activation to saturate; Elman's tanh does."""
    assert "the activations saturate" not in prose("linear") and "activation" not in prose("linear")
    assert "loose where the activations saturate or the weights' singular vectors do not line up" in prose("elman")


def test_forward_modes_cost_names_its_size():
    """The cost of forward mode is in the size of the state, n, not in h, which is a state of the LSTM."""
    for name in ("elman-onehot", "lstm"):
        text = prose(name)
        assert "with $n$ numbers in the state, $O(n^2 |\\theta|)$ work per step against $O(|\\theta|)$" in text, name
        assert "O(h^2" not in text


@pytest.mark.parametrize("name", ZOO)
def test_theta_means_the_parameters_only(name):
    text = shown_document(name)
    assert "$\\theta$ stands for all the parameters" in text
    assert "\\theta_" not in text and "}_\\theta" not in text  # no angle theta_k, no threshold clip_theta


@pytest.mark.parametrize("name", ZOO)
def test_products_are_written_in_their_order(name):
    """No \\prod hides which factor is on the left: the closed form's A_{t+1} A_{t+2} ... A_j (the oldest step's
    on the left), the lemma's Gamma_t Gamma_{t-1} ... Gamma_{i+1} (the newest on the left)."""
    text = shown_document(name)
    assert "\\prod" not in text
    if name in ("elman", "lstm"):
        assert r"\mathbf{A}_{t+1} \mathbf{A}_{t+2} \cdots \mathbf{A}_{j}" in text
        assert r"\boldsymbol{\Gamma}_{t} \boldsymbol{\Gamma}_{t-1} \cdots \boldsymbol{\Gamma}_{i+1}" in text


def test_elman_says_which_of_its_symbols_are_goodfellows():
    assert "Goodfellow et al. write $\\mathbf{o}_t$ for the scores $\\mathbf{s}_t$ here" in prose("elman")


def test_source_lines_are_plain_text():
    """The GRU's source line prints no braces or underscores of code."""
    source = next(line for line in shown_document("gru").splitlines() if line.startswith("Source:"))
    assert "\\{" not in source and "\\_" not in source


def test_the_figure_is_drawn_from_a_users_cell():
    """The Minimal Gated Unit (tests/support/user_cells.py): every value of steps 1 to 3 is a node of the TikZ
    picture and of the SVG, and the backward edges run from each state to the one before."""
    model = mgu()
    (graph,) = [s for s in sections(model) if s.name == "graph"]
    (figure,) = graph.items
    for seq in (*model.inputs, *(seq for seq, _ in model.assignments)):
        for step in (1, 2, 3):
            assert f"{{${latex(SeqAt(seq.name, step, 1, seq.role))}$}}" in figure.tikz, (seq.name, step)
    values = 3 * (len(model.inputs) + len(model.assignments) + 2) + len(model.states)  # + a loss and a target a step
    assert figure.svg.count("<rect x=") == figure.tikz.count(r"\node[v,") == values  # not the parameters' boxes
    # h_tilde at step 2: h with a combining tilde, the step its subscript
    assert figure.svg.count('>h\u0303</tspan><tspan font-size="9" dy="3">2<') == 1
    ids = dict(re.findall(r"\\node\[v, [^\]]*\] \((n\d+)\) at \([^)]*\) \{\$(.*)\$\};", figure.tikz))
    h = {step: next(n for n, label in ids.items() if label == latex(model.states[0](step))) for step in (0, 1, 2, 3)}
    backward = re.findall(r"\\draw\[bw\] \((n\d+)\) \.\. controls \S+ and \S+ \.\. \((n\d+)\);", figure.tikz)
    for step in (1, 2, 3):
        assert (h[step], h[step - 1]) in backward, step
