"""Gradient flow, derived: the step Jacobian from the closed form, the bound's gamma from the registry,
the LSTM's constant error carousel, exact eigenvalues of powers, and the document section."""

import re
import shutil
import subprocess
import textwrap

import pytest
import sympy as sp

from bptt.derive.bptt import derive
from bptt.derive.closed_form import block_closed_form, closed_form, k
from bptt.derive.flow import eigen_power_step, power_eigenvalues
from bptt.derive.model import sequence, sizes
from bptt.derive.models import load, names
from bptt.derive.nodes import Diag
from bptt.documents.derived import derived
from bptt.documents.flow_document import flow_section
from bptt.documents.width import width
from bptt.tests.support.flow import gradient_flow, sigmoid_cell

EXAMPLES = ("examples/gated_rnn.py:gated_rnn", "examples/lstm.py:lstm")


@pytest.mark.parametrize("name", ["linear", "elman", "elman-onehot", "elman-jordan", "gru"])
def test_step_jacobian_is_the_transposed_closed_form_jacobian(name):
    """J_k is derived from the model's own closed form: exactly the transpose of its A_k."""
    model = load(name)
    flow = gradient_flow(model)
    assert flow.jacobian.T.doit() == closed_form(derive(model), model.states[0]).jacobian


def test_elman_jacobian_reads_like_the_textbook():
    flow = gradient_flow(load("elman"))
    h, W = load("elman").states[0], load("elman").params[1]
    assert flow.jacobian == Diag(sp.OneMatrix(*h(k).shape) - sp.HadamardPower(h(k), 2)) * W
    assert not flow.is_power and gradient_flow(load("linear")).is_power


def test_blocks_are_the_block_closed_form_transposed():
    model = load("lstm")
    form = block_closed_form(derive(model))
    flow = gradient_flow(model)
    assert {(r.name, c.name) for r, c in flow.blocks} == {("c", "c"), ("c", "h"), ("h", "c"), ("h", "h")}
    for (row, col), block in flow.blocks.items():
        assert block == form.blocks[(col, row)].T


@pytest.mark.parametrize(
    "model, gamma, slopes, matrices",
    [
        (load("linear"), 1, (), ("W_hh",)),
        (load("elman"), 1, ("tanh",), ("W",)),
        (sigmoid_cell(), sp.Rational(1, 4), ("sigmoid",), ("W",)),
    ],
    ids=["linear", "tanh", "sigmoid"],
)
def test_bound_reads_gamma_from_the_registry(model, gamma, slopes, matrices):
    """gamma = sup|phi'| of the activation whose slope is J_k's diagonal factor: 1 for tanh, 1/4 for the sigmoid."""
    bound = gradient_flow(model).bound
    assert (bound.gamma, bound.slopes, tuple(w.name for w in bound.matrices)) == (gamma, slopes, matrices)


@pytest.mark.parametrize("name", ["gru", "lstm"])
def test_no_bound_is_read_off_a_sum(name):
    assert gradient_flow(load(name)).bound is None


def test_lstm_constant_error_carousel():
    """dc_t/dc_{t-1} = diag(f_t) for torch's LSTM; with peepholes the gates add to it, the direct path is still
    diag(f_t)."""
    f_k = sequence("f", sizes("h"), "intermediate")(k)
    (carousel,) = gradient_flow(load("lstm")).carousels
    assert (carousel.state.name, carousel.direct, carousel.partial) == ("c", Diag(f_k), Diag(f_k))
    (peephole,) = gradient_flow(load("lstm-peephole")).carousels
    assert peephole.direct == Diag(f_k) and peephole.partial != peephole.direct
    (gru,) = gradient_flow(load("gru")).carousels
    assert gru.direct == Diag(sequence("z", sizes("h"), "intermediate")(k))
    assert gradient_flow(load("elman")).carousels == ()


def test_recurrent_parameters_and_no_flow_under_teacher_forcing():
    assert [p.name for p in gradient_flow(load("lstm")).recurrent] == ["W_hi", "W_hf", "W_hg", "W_ho"]
    assert [p.name for p in gradient_flow(load("gru")).recurrent] == ["W_hr", "W_hz", "W_hn"]
    assert [p.name for p in gradient_flow(load("elman-jordan")).recurrent] == ["W"]
    assert gradient_flow(load("jordan")).states == ()


def test_eigen_power_induction_step():
    """(Q Lambda^n Q^-1)(Q Lambda Q^-1) = Q Lambda^(n+1) Q^-1: the step of W^n = Q Lambda^n Q^-1."""
    step, expected = eigen_power_step()
    assert step.doit() == expected
    Q, Lam = expected.args[0], expected.args[1].base
    assert (step * Q * Lam * Q).doit() != Q * Lam ** (expected.args[1].exp + 1) * Q.I  # the check can fail


@pytest.mark.parametrize(
    "eigenvalues, power",
    [((2, sp.Rational(-1, 3), sp.Rational(1, 2)), 5), ((3, 3, -1), 4), ((sp.I, -sp.I), 3)],
    ids=["distinct", "repeated", "rotation"],
)
def test_power_has_the_powers_of_the_eigenvalues_exactly(eigenvalues, power):
    """M^k has eigenvalues lambda^k, with multiplicities, exactly: M = Q diag(lambda) Q^-1 for a rational Q."""
    n = len(eigenvalues)
    Q = sp.Matrix(n, n, lambda i, j: sp.Rational((i + 2) * (j + 1) % 7 + (i == j) * 5, 1 + (i + j) % 3))
    assert Q.det() != 0
    M = Q * sp.diag(*eigenvalues) * Q.inv()
    of_power, powered = power_eigenvalues(M, power)
    expected = {}
    for value in eigenvalues:
        expected[sp.nsimplify(sp.expand(value**power))] = expected.get(sp.nsimplify(sp.expand(value**power)), 0) + 1
    assert of_power == powered == expected


# Macros the section uses beyond those the derivation test lists for GitHub's MathJax; MathJax has each.
MATHJAX_EXTRA = set("cdot cdots cos gamma ldots lambda Lambda le max ne rho sup to varphi".split())
MATHJAX = set(
    "Gamma alpha bar begin beta boldsymbol dot end frac ge log mathbf min nmid odot operatorname partial pi prod "
    "quad right left sigma sum tanh tau textrm tfrac theta top xi".split()
)


def _render(section):
    parts = [f"\\section*{{{section.title}}}", section.text]
    for eq in section.equations:
        rows = eq.rows
        body = "\\begin{split}\n" + " \\\\\n".join(rows) + "\n\\end{split}" if len(rows) > 1 else rows[0]
        parts.append(f"\\begin{{equation*}}\n{body}\n\\end{{equation*}}\n{eq.why}\n")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def sections():
    return {name: flow_section(derived(load(name))) for name in (*names(), *EXAMPLES)}


def test_every_model_gets_the_section(sections):
    for name, section in sections.items():
        assert section.title == "Gradient flow through time"
        assert any(eq.lhs == r"\operatorname{clip}(\mathbf{g})" for eq in section.equations), name
    assert "no gradient flows back through time" in sections["jordan"].text
    lhs = [eq.lhs for eq in sections["lstm"].equations]
    assert r"\mathbf{D}^{c}_{k}" in lhs  # the direct Jacobian, not the block A^cc_k
    assert any(r"\operatorname{diag}\left(\mathbf{f}_{T} \odot \cdots" in eq.rhs for eq in sections["lstm"].equations)
    rows = [row for eq in sections["elman"].equations for row in eq.rows]
    assert r"\mathbf{J}_T \mathbf{J}_{T-1} \cdots \mathbf{J}_{t+1}" in " ".join(rows)
    assert any(r"\le \left(\sigma_{\max}(\mathbf{W})\right)^{T-t}" in row for row in rows)
    linear = " ".join(row for eq in sections["linear"].equations for row in eq.rows)
    assert r"\mathbf{Q} \boldsymbol{\Lambda}^{T-t} \mathbf{Q}^{-1}" in linear
    assert r"\le \left(\frac{\lambda_2}{\lambda_1}\right)^{2k} \operatorname{tan}^2 \varphi_0" in linear


def test_sections_hold_equations_and_mathjax_macros(sections):
    """Every row has a top-level '=' (as the documents' rows do), and every macro is one GitHub's MathJax knows."""
    for name, section in sections.items():
        for eq in section.equations:
            assert re.sub(r"\{[^{}]*\}", "", eq.rows[0]).count("=") >= 1 or " = " in eq.rows[0], (name, eq.rows[0])
        text = " ".join((section.text, *(eq.why + " " + " ".join(eq.rows) for eq in section.equations)))
        used = set(re.findall(r"\\([A-Za-z]+)", text))
        assert used <= MATHJAX | MATHJAX_EXTRA, (name, sorted(used - MATHJAX - MATHJAX_EXTRA))


def test_section_compiles_without_overfull_lines(sections, tmp_path):
    """The section of every zoo model and example, in the documents' page layout: a PDF, no line too wide."""
    program = shutil.which("pdflatex")
    if program is None:
        pytest.fail("pdflatex is not installed: apt-get install texlive-latex-base")
    preamble = textwrap.dedent(
        r"""
        \documentclass[11pt]{article}
        \usepackage[a4paper,margin=2cm]{geometry}
        \usepackage{amsmath,amssymb}
        \begin{document}
        """
    )
    rows = sorted(
        {row.replace("&", "") for section in sections.values() for eq in section.equations for row in eq.rows}
    )
    measures = "".join(
        rf"\settowidth{{\w}}{{$\displaystyle {row}$}}\typeout{{ROW {n}: \the\w}}" for n, row in enumerate(rows)
    )
    body = "\n".join(map(_render, sections.values()))
    tex = tmp_path / "flow.tex"
    tex.write_text(f"{preamble}\\newlength{{\\w}}\n{measures}\n{body}\n\\end{{document}}\n", encoding="utf-8")
    result = subprocess.run(
        [program, "-interaction=nonstopmode", "-halt-on-error", tex.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    log = tex.with_suffix(".log").read_text(encoding="latin-1")
    assert "Overfull \\hbox" not in log, re.findall(r"Overfull \\hbox.*", log)
    assert tex.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
    # The line breaker packs rows by an estimate of their width: within [0.9, 1.15] of pdflatex's, as for the documents.
    real = {int(n): float(points) for n, points in re.findall(r"ROW (\d+): ([\d.]+)pt", log)}
    assert len(real) == len(rows)
    off = [
        (round(width(row) / real[n], 3), row)
        for n, row in enumerate(rows)
        if real[n] > 30 and not 0.9 <= width(row) / real[n] <= 1.15
    ]
    assert not off, off
