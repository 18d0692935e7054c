"""The documents read as a student reads them (issue 29, items 2-7, 9 and 10), on every zoo document and on a
user's cells (examples/): each display follows the sentence that introduces it, each symbol is given before it is
used and means one thing, figures sit at the top of their own section in the PDF, the prose speaks of the maths and
not of the tool's rules, and each zoo document ends against its source."""

import re

import pytest

from bptt.derive.direction import reverse_states
from bptt.derive.models import load
from bptt.documents.document import sections
from bptt.documents.equation import Display, Figure, Table
from bptt.documents.latex import latex
from bptt.tests.support import user_cells
from bptt.tests.support.printed import DOCUMENTS, GROUP, ZOO, shown, shown_document
from bptt.tests.support.user_cells import mgu

XDIST_GROUP = GROUP  # the documents of shown() are built once for the modules that read them


def sentences(text):
    """The sentences of a text, the `.` inside $...$ maths not ending one."""
    plain = re.sub(r"\$[^$]*\$", lambda m: "M" * len(m[0]), text)
    ends = [m.end() for m in re.finditer(r"[.:;] (?=[A-Z(])", plain)]
    return [text[a:b].strip() for a, b in zip([0, *ends], [*ends, len(text)], strict=True) if text[a:b].strip()]


def introductions(name):
    """(the text a display follows, the display, its section) for every display of a document: the display's own
    sentence, or the section's text (and the figures' captions) for a section's first display without one."""
    out = []
    for section in shown(name):
        before = section.text
        for item in section.items:
            if isinstance(item, Display):
                out.append((item.why or before, item, section))
                before = getattr(item, "after", "")
            elif not isinstance(item, Figure):
                before = getattr(item, "why", "")
    return out


def words(name):
    """Every sentence of a document: the sections' texts, the sentences before and after displays, tables,
    captions."""
    out = []
    for section in shown(name):
        out.append(section.text)
        for item in section.items:
            out += [getattr(item, "why", ""), getattr(item, "after", ""), getattr(item, "caption", "")]
    return " ".join(out)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_display_follows_the_sentence_that_introduces_it(name):
    """The last sentence before a display ends with a colon and speaks of what is shown: it writes maths (a symbol
    of the display) or is one of the few plain lead-ins; a remark on a display (a bound's looseness, clipping's
    blind spot, a normal matrix's norm, that a bound cannot be read off) comes after it, never before another one."""
    remarks = ("loose where", "does nothing for vanishing", "normal matrix", "decide how much flows", "satisfies")
    for text, display, section in introductions(name):
        assert text.endswith(":"), (section.name, text[-200:])
        last = sentences(text)[-1]
        assert last != "So:" and not any(remark in last for remark in remarks), (section.name, last)
        assert "$" in last or last.startswith(LEAD_INS), (section.name, last, display.rows[0][:80])


LEAD_INS = (
    "The local terms, what each state's adjoint receives",
    "The adjoint of each intermediate value follows by the chain rule",
    "By the chain rule through the steps between",
)


def adjoints_read(rhs, states):
    """The names of the states whose adjoint at the last step T a display's right-hand side reads."""
    return set(re.findall(r"\\frac\{\\partial L\}\{\\partial \\mathbf\{(\w+)\}_\{T\}\}", rhs)) & states


@pytest.mark.parametrize("name", DOCUMENTS)
def test_a_state_adjoint_is_given_before_one_that_reads_it(name):
    """In the state adjoints, an adjoint at step T is shown before any other that reads it (the LSTM's
    dL/dc_T reads dL/dh_T, so dL/dh_T comes first)."""
    states = {seq.name for seq in load(name).states}
    given = set()
    for section in shown(name):
        for eq in section.equations if section.name == "backward" else ():
            assert adjoints_read(eq.rhs, states) <= given | set(re.findall(r"mathbf\{(\w+)\}_\{T\}", eq.lhs)), (
                eq.lhs,
                given,
            )
            given |= set(re.findall(r"\\mathbf\{(\w+)\}_\{T\}\}$", eq.lhs))


@pytest.mark.parametrize("name", DOCUMENTS)
def test_the_loss_has_one_name_per_meaning(name):
    """l is the loss function (where the source leaves it general), ell_t the loss of step t, defined in the
    model's equations before any other use, L the loss of the sequence; there is no L_T."""
    text = shown_document(name)
    assert "L_T" not in text and "L_{T}" not in text
    model_section = text.split("\\label{model}", 1)[1].split("\\section*", 1)[0]
    assert "\\ell_{t} &= " in model_section and "\\sum_{t=1}^{T} \\ell_{t}" in model_section
    assert text.index("\\ell_{t} &= ") < min(text.index(m) for m in ("\\ell_{1}", "\\ell_t$", "\\ell_{T}") if m in text)


def test_linears_loss_is_general_in_every_sentence():
    """The model's note and the outputs' adjoint say the same: l is left general, and a computation picks one."""
    text = words("linear")
    assert "not specified" not in text and "taken to be" not in text
    assert "leaves the loss function $l$ general" in text and "since the derivation leaves $l$ general" in text


@pytest.mark.parametrize("name", ["lstm", "lstm-peephole", "examples/lstm.py:lstm"])
def test_the_carousels_quantities_have_their_own_names(name):
    """The closed form's block A^cc_k = (dc_k/dc_{k-1})^T holds every term of c_k's equation by c_{k-1}; the
    carousel's factor diag(f_k) is D^c_k, as the plot names it; the plot's every-path block is Phi^c_{T,t}: no
    display calls the second dc_k/dc_{k-1}, and each name is written in a sentence before its first display."""
    (flow,) = [s for s in shown(name) if s.name == "flow"]
    c = r"\mathbf{c}"
    lhs = [eq.lhs for eq in flow.equations]
    assert rf"\frac{{\partial {c}_{{k}}}}{{\partial {c}_{{k-1}}}}" not in lhs
    (direct,) = [d for d in flow.displays if d.equations[0].lhs == r"\mathbf{D}^{c}_{k}"]
    assert direct.equations[0].rhs == r"\operatorname{diag}\left(\mathbf{f}_{k}\right)"
    assert direct.why.startswith(r"Write $\mathbf{D}^{c}_{k}$ for the factor of the direct path")
    peepholes = name == "lstm-peephole"
    assert ("holds it and the other terms" in direct.why) == peepholes
    assert ("It is the closed form's block $\\mathbf{A}^{cc}_{k}$" in direct.why) != peepholes
    assert r"Write $\boldsymbol{\Phi}^{c}_{T,t}$ for the block of" in words(name)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_figures_sit_at_the_top_of_their_own_section(name, documents):
    """No figure floats: each is set right after its section's title, before its text, on the title's page, and
    before the next section starts, so that no figure splits another section's equations."""
    printed = documents[name].printed
    tex = printed.tex.read_text(encoding="utf-8")
    assert "\\begin{figure}" not in tex
    order = [label for label, _ in sorted(printed.marks.items(), key=lambda item: printed.position(item[0]))]
    figures = re.findall(r"\\label\{(figure-([\w-]+)-\d+)\}", tex)
    assert figures, name
    for figure, section in figures:
        start = tex.index(f"\\label{{{section}}}") + len(f"\\label{{{section}}}")
        assert tex[start:].startswith("\\nobreak\n\\begin{placedfigure}"), (name, section)
        assert order.index(figure) == order.index(section) + 1, (name, figure, order)
        assert printed.marks[figure][0] == printed.marks[section][0], (name, figure, "not on its title's page")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_the_prose_speaks_of_the_maths_not_of_the_tools_rules(name):
    text = words(name)
    for phrase in (
        "checked symbolically",
        "Each by the chain rule",  # a fragment with no verb
        "single term with at most one diagonal factor",  # the inlining rule
        "the gradient stays near 1",  # it is the factor that does
        "against $O(n^2)$ for BPTT",  # BPTT's step is O(|theta|)
    ):
        assert phrase not in text, (name, phrase)
    rows = [row for section in shown(name) for display in section.displays for row in display.rows]
    assert not any(r" ;\; " in row for row in rows), name  # no MATLAB-style blocks [A, B ; C, D]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_is_the_state_only_of_a_state(name):
    """ "x is the state" names a state of the model (WildML's s_t is the output scores in six documents)."""
    states = {latex(seq()) for seq in load(name).states}
    for said in re.findall(r"\$([^$]*)\$ is the state", words(name)):
        assert said.replace("_t", "_{t}") in states, (name, said)
    forward = [s for s in shown(name) if s.name == "forward"]  # none for a model of reverse-time states
    assert len(forward) == (not reverse_states(load(name)))
    assert all("where $\\mathbf{s}_t$ is the state" not in section.text for section in forward)


def test_linears_eigenvectors_are_those_of_the_transpose():
    assert "along an eigenvector of $\\mathbf{W}_\\textrm{hh}^\\top$ the gradient is scaled by" in words("linear")


def test_a_teacher_forced_state_is_not_checkpointed():
    """Under teacher forcing o_t is data: elman-jordan's checkpoint holds h_t alone, and a step reads no o."""
    (checkpoints,) = [s for s in shown("elman-jordan") if s.name == "checkpoints"]
    assert "must hold the state $\\mathbf{h}_{t}$ alone" in checkpoints.text
    assert "\\mathbf{o}_{t" not in checkpoints.text


def test_a_flat_function_is_explained_and_teacher_forcing_named():
    assert "flat function" not in words("jordan")
    assert "as data, which teacher forcing puts in place of the value" in words("jordan")


def test_a_layers_parameters_are_printed_as_its_states():
    """W_ih1 prints with the layer as a superscript, as h1 does: W^(1)_ih, h^(1)_t."""
    assert latex(load("examples/lstm_2layer.py:lstm").params[0]) == r"{\mathbf{W}^{(1)}}_\textrm{ih}"


@pytest.mark.parametrize("name", ZOO)
def test_each_zoo_document_ends_against_its_source(name):
    """The last section compares with the source: a formula of the source per display, and after it what this
    derivation says of it."""
    last = shown(name)[-1]
    assert (last.name, last.title) == ("source", "Against the source")
    assert last.displays and all(d.why.endswith(":") and d.after for d in last.displays)


def test_the_source_section_says_where_a_source_is_wrong():
    """elman: the DL-book notes' W^T (grad) diag(...) is not a valid product, and the book's order is the
    derivation's; linear: d2l truncates the forward sum dh_t/dw_h, which is the window truncation run forward."""
    (elman,) = [s for s in shown("elman") if s.name == "source"]
    (notes,) = [d for d in elman.displays if "The notes write the recursion" in d.why]
    assert r"\mathbf{W}^\top \left(\nabla_{\mathbf{h}^{(t+1)}} L\right) \operatorname{diag}" in notes.rows[0]
    assert notes.after.startswith("That product is not defined")
    (linear,) = [s for s in shown("linear") if s.name == "source"]
    after = [d.after for d in linear.displays]
    assert any("truncates this sum after $\\tau$ steps" in a and "window truncation" in a for a in after)


def test_a_users_cell_named_as_a_zoo_model_has_no_comparison():
    assert "source" not in [s.name for s in shown("examples/lstm.py:lstm")]
    assert "source" not in [s.name for s in sections(mgu())]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_markdown_carries_the_text_of_the_pdf(name):
    """Every sentence of the LaTeX document is in the Markdown one, in the same order, the figures first in their
    sections in both: the sections' texts, the sentences before and after displays, the figures' captions and the
    tables' cells."""
    md, tex = shown_document(name, "md"), shown_document(name)
    at = 0
    for section in shown(name):
        figures = [item.caption for item in section.items if isinstance(item, Figure)]  # first in their section
        items = [said for item in section.items if not isinstance(item, Figure) for said in _said(item)]
        for text in (*figures, section.text, *items):
            if text:
                assert text in tex, text[:80]
                found = md.find(text, at)
                assert found >= 0, (name, text[:80])
                at = found


def _said(item):
    """The text of a display or a table, in the order shown."""
    cells = [*getattr(item, "header", ()), *(cell for row in getattr(item, "rows", ()) for cell in row)]
    return [getattr(item, "why", ""), *(cells if isinstance(item, Table) else []), getattr(item, "after", "")]


@pytest.mark.parametrize("name", ["linear", "examples/lstm.py:lstm"])
def test_the_notebook_shows_the_markdown_of_the_pdf(name):
    """The notebook's derivation is the Markdown document, so it carries the PDF's sentences as the test above
    checks them."""
    from bptt.app.notebook import derive

    assert derive(name)._repr_markdown_() == shown_document(name, "md")


def test_d2ls_closed_form_is_the_documents_as_the_source_section_says():
    """ "The same as the closed form above": d2l's formula, in its notation (W_{hh}), is the document's reindexed
    closed form once the document's upright subscripts (W_\\textrm{hh}) are written as d2l writes them."""
    (closed,) = [s for s in shown("linear") if s.name == "closed-form"]
    (source,) = [s for s in shown("linear") if s.name == "source"]
    reindexed = [eq.rhs for eq in closed.equations if "T+t-i" in eq.rhs]
    (d2l,) = [eq.rhs for eq in source.equations if eq.lhs == r"\frac{\partial L}{\partial \mathbf{h}_t}"]
    assert [re.sub(r"_\\textrm\{(\w+)\}", r"_{\1}", rhs) for rhs in reindexed] == [d2l]


def values_read(name):
    """What the checkpoint section says one backward step reads, each value as its role and time: (state, t-1)."""
    model = load(name)
    roles = {latex(seq()).split("_")[0]: seq.role for seq in (*model.states, *(seq for seq, _ in model.outputs))}
    (checkpoints,) = [s for s in shown(name) if s.name == "checkpoints"]
    reads = re.match(r"One backward step \$t\$ reads (.*?), besides", checkpoints.text)[1]
    found = re.findall(r"\$(\\mathbf\{\w+\})_\{(t[-+]?\d*)\}\$", reads)
    return sorted((roles[value], time) for value, time in found)


def test_a_one_hot_input_changes_only_what_the_input_is():
    """elman and elman-onehot are one cell (a state through tanh, scores read from it): a backward step reads the
    same values, whether the cell names its pre-activation (elman's a_t) or not; the one-hot input is data."""
    assert values_read("elman") == values_read("elman-onehot") == [("output", "t"), ("state", "t"), ("state", "t-1")]


def model_rows(spec):
    """{the left-hand side: the right-hand side} of the model section's equations."""
    (model,) = [s for s in sections(load(spec), ("model",))]
    return {eq.lhs: eq.rhs for eq in model.equations}


def test_a_users_cho_gru_is_printed_as_written():
    """Cho et al.'s GRU as a user writes it (tests/support/user_cells.py, loaded as `bptt latex` loads a file): each
    sum and elementwise product in the order written, and the candidate h_tilde with Cho's tilde."""
    rows = model_rows(f"{user_cells.__file__}:gru_cho")
    h, r, z, candidate = r"\mathbf{h}_{t-1}", r"\mathbf{r}_{t}", r"\mathbf{z}_{t}", r"\tilde{\mathbf{h}}_{t}"
    assert rows[r] == r"\sigma\left(\mathbf{W}_\textrm{r} \mathbf{x}_{t} + \mathbf{U}_\textrm{r} " + h + r"\right)"
    assert (
        rows[candidate]
        == rf"\tanh\left(\mathbf{{W}} \mathbf{{x}}_{{t}} + \mathbf{{U}} \left({r} \odot {h}\right)\right)"
    )
    assert rows[r"\mathbf{h}_{t}"] == rf"{z} \odot {h} + \left(\mathbf{{1}} - {z}\right) \odot {candidate}"


def test_the_zoos_models_are_printed_as_their_sources_write_them():
    """The order is the author's, not a rule's: Goodfellow's a_t = b + W h_{t-1} + U x_t, torch's
    n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn)) (its bracket named m_t)."""
    assert (
        model_rows("elman")[r"\mathbf{a}_{t}"]
        == r"\mathbf{b} + \mathbf{W} \mathbf{h}_{t-1} + \mathbf{U} \mathbf{x}_{t}"
    )
    gru = model_rows("gru")
    assert gru[r"\mathbf{m}_{t}"] == r"\mathbf{W}_\textrm{hn} \mathbf{h}_{t-1} + \mathbf{b}_\textrm{hn}"
    n = r"\mathbf{W}_\textrm{in} \mathbf{x}_{t} + \mathbf{b}_\textrm{in} + \mathbf{r}_{t} \odot \mathbf{m}_{t}"
    assert gru[r"\bar{\mathbf{n}}_{t}"] == n


def test_a_norm_or_a_reduction_keeps_its_sum_as_written():
    """Ba et al.'s a_t = LN(W_h h_{t-1}) + LN(W_x x_t) + b (each norm expanded to gain * a_hat + bias, in its place),
    and a mean among the terms of a sum (1 mean(x_t) in the third place written): their sums were printed in
    SymPy's order, b first, the mean before W h_{t-1}."""
    a = model_rows("lstm-layernorm")[r"\mathbf{a}_{t}"]
    hats = [rf"\hat{{{{\mathbf{{a}}^{{({k})}}}}}}_{{\textrm{{in}},t}}" for k in "12"]
    norms = [
        rf"\boldsymbol{{\alpha}}_\textrm{{{k}}} \odot {hat} + \boldsymbol{{\beta}}_\textrm{{{k}}}"
        for k, hat in zip("12", hats, strict=True)
    ]
    assert a == f"{norms[0]} + {norms[1]} + \\mathbf{{b}}", a
    rows = model_rows(f"{user_cells.__file__}:mean_among_terms")
    terms = [
        r"\mathbf{W} \mathbf{h}_{t-1}",
        r"\mathbf{U} \mathbf{x}_{t}",
        r"\mathbf{1} \operatorname{mean}\left(\mathbf{x}_{t}\right)",
    ]
    assert rows[r"\mathbf{h}_{t}"] == rf"\tanh\left({' + '.join(terms)}\right)"


@pytest.mark.parametrize("name", ["elman", "jordan", "gru", "examples/lstm.py:lstm"])
def test_an_equation_restated_in_the_prose_is_the_models_as_written(name):
    """ "Through a_t = b + W h_{t-1} + U x_t:": an equation of the model quoted at step t is its row in the model
    section, in its author's order."""
    rows = {lhs: rhs for lhs, rhs in model_rows(name).items() if lhs.endswith("_{t}")}
    quoted = re.findall(r"\$([^$=]*?) = ([^$]*)\$", words(name))
    assert any(lhs in rows for lhs, _ in quoted), quoted[:3]
    for lhs, rhs in quoted:
        assert rows.get(lhs, rhs) == rhs, (lhs, rhs)
