"""`bptt analyze`: the command for zoo models and users' cells, its usage errors, the missing-matplotlib message,
the plots (valid PNGs whose data is the printed table), the progress bar, and the notebook API."""

import ast
import base64
import concurrent.futures
import csv
import functools
import html
import html.parser
import io
import pathlib
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import bptt.app.analysis.analyze as analysis
import bptt.documents.document as document_module
from bptt.app import cli
from bptt.app.analysis import plots
from bptt.app.notebook import analyze as analyze_for_notebook
from bptt.app.notebook import derive as derive_for_notebook
from bptt.derive.models import load
from bptt.documents.render import document
from bptt.tests.support.cli import bptt
from bptt.tests.support.zoo import supporting

REPO = pathlib.Path(__file__).resolve().parents[2]
USER_CELL = "examples/gated_rnn.py:gated_rnn"
HIDE_MATPLOTLIB = "raise ImportError('No module named matplotlib (hidden by the test)')\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The CLI runs (tests/support/cli.py), side by side: {name: (CompletedProcess, its output folder)}."""
    root = tmp_path_factory.mktemp("analyze")
    hidden = root / "hidden"
    (hidden / "matplotlib").mkdir(parents=True)
    (hidden / "matplotlib" / "__init__.py").write_text(HIDE_MATPLOTLIB, encoding="utf-8")
    env = {**__import__("os").environ, "PYTHONPATH": str(hidden)}
    plans = {
        "elman": (("elman", "--steps", 6, "--radius", "0.5,1.5", "--csv"), True, None),
        "user": ((USER_CELL, "--steps", 5, "--seed", 3), False, None),
        "no matplotlib, plots": (("linear", "--steps", 3), True, env),
    }
    folders = {name: root / name.replace(" ", "_").replace(",", "") for name in plans}
    for folder in folders.values():
        folder.mkdir()

    def go(name):
        args, with_output, environment = plans[name]
        return bptt("analyze", *args, *(("-o", folders[name]) if with_output else ()), env=environment)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = dict(zip(plans, pool.map(go, plans), strict=True))
    return {name: (results[name], folders[name]) for name in plans}


def csv_blocks(text):
    """{table name: (title, the CSV text)} of `bptt analyze --csv` output."""
    out = {}
    for block in text.split("\n# ")[0:]:
        head, _, body = block.removeprefix("# ").partition("\n")
        name, _, title = head.partition(": ")
        out[name] = (title, body)
    return out


def png_size(data):
    """(width, height) of a PNG, after checking its signature and first chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


def plot_size(table):
    """640 x 480 pixels for up to two panels side by side, wider for more; 720 high for two rows of panels."""
    return (round(640 * max(1, plots.panels(table) / 2)), 720 if table.name.startswith("gradient_norms") else 480)


def test_cli_prints_csv_equal_to_the_analysis_and_writes_plots(runs):
    """`--csv` prints every table exactly (floats read back equal), the same CSV files go beside the PNGs."""
    result, folder = runs["elman"]
    assert result.returncode == 0, result.stderr
    expected = analysis.analyze(load("elman"), 6, 0, (0.5, 1.5))
    blocks = csv_blocks(result.stdout)
    assert list(blocks) == [table.name for table in expected.tables]
    for table in expected.tables:
        assert blocks[table.name] == (table.title, table.csv())
        assert (folder / f"{table.name}.csv").read_text(encoding="utf-8") == table.csv()
        assert png_size((folder / f"{table.name}.png").read_bytes()) == plot_size(table)
        rows = list(csv.reader(io.StringIO(table.csv())))
        assert tuple(rows[0]) == table.columns
        for read, row in zip(rows[1:], table.rows, strict=True):
            assert [
                value if isinstance(value, str) else float(cell) for cell, value in zip(read, row, strict=True)
            ] == [value if isinstance(value, str) else float(value) for value in row]
    assert sorted(line.split()[-1] for line in result.stderr.splitlines()) == sorted(
        str(folder / f"{t.name}{suffix}") for t in expected.tables for suffix in (".png", ".csv")
    )


def parse_text(stdout):
    """{title: rows of cells} of the plain-text tables, after the header line."""
    out = {}
    for block in stdout.split("\n\n"):
        lines = block.splitlines()
        if len(lines) > 2 and "=" not in lines[1]:
            out[lines[-len(lines) + (1 if "T=" not in lines[0] else 2) - 1]] = [line.split() for line in lines]
    return out


def test_cli_analyzes_a_users_cell_and_prints_tables(runs):
    """A user's cell through a subprocess: the printed tables are the analysis to 6 digits; no bar off a terminal."""
    result, _ = runs["user"]
    assert result.returncode == 0 and result.stderr == "", result.stderr
    expected = analysis.analyze(load(USER_CELL), 5, 3, analysis.RADII)
    assert result.stdout.startswith("gated-rnn: T=5 seed=3 radii=0.5,1,1.5")
    blocks = result.stdout.split("\n\n")
    assert len(blocks) == len(expected.tables)
    for block, table in zip(blocks, expected.tables, strict=True):
        lines = block.splitlines()[1:] if block is blocks[0] else block.splitlines()
        assert lines[0] == table.title and lines[1].split() == list(table.columns)
        for line, row in zip(lines[2:], table.rows, strict=True):
            for cell, value in zip(line.split(), row, strict=True):
                assert cell == value if isinstance(value, str) else float(cell) == pytest.approx(value, rel=1e-5)


def test_missing_matplotlib_is_one_line_and_writes_nothing(runs):
    result, folder = runs["no matplotlib, plots"]
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"bptt analyze: error: {plots.MISSING}\n"
    assert "bptt[plots]" in result.stderr and list(folder.iterdir()) == []


def run_main(argv, capsys):
    try:
        code = cli.main(argv)
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", [n for n in supporting("analyze") if n != "jordan"])
def test_every_model_with_a_recurrent_state_is_analyzed(name, capsys):
    code, out, err = run_main(["analyze", name, "--steps", "3", "--radius", "0.9"], capsys)
    assert code == 0 and err == "", err
    titles = [
        "Gradient norms against",
        "Eigenvalues of the recurrent",
        "|cos(M^k x, v1)|",
        "Global gradient norm before",
    ]
    titles += ["The constant error carousel through"] if name in ("gru", "lstm", "lstm-peephole") else []
    assert [line for line in out.splitlines() if line.startswith(tuple(titles))] == [
        table.title for table in analysis.analyze(load(name), 3, 0, (0.9,)).tables
    ]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["analyze", "elman", "--radius", "x"], "argument --radius: expected positive numbers"),
        (["analyze", "elman", "--radius", ""], "argument --radius"),
        (["analyze", "elman", "--radius", "0.5,,1"], "argument --radius"),
        (["analyze", "elman", "--radius", "0"], "argument --radius"),
        (["analyze", "elman", "--radius", "-1"], "argument --radius"),
        (["analyze", "elman", "--radius", "inf"], "argument --radius"),
        (["analyze", "elman", "--radius", "nan"], "argument --radius"),
        (["analyze", "elman", "--steps", "0"], "argument --steps: expected a positive integer"),
        (["analyze", "elman", "--seed", "-1"], "argument --seed"),
        (["analyze", "elman", "--bogus"], "unrecognized arguments"),
        (["analyze"], "the following arguments are required: model"),
        (["analyze", "nosuch"], "unknown model 'nosuch'"),
        (["analyze", "examples/nosuch.py:f"], "does not exist"),
        (["analyze", "jordan"], "teacher forcing makes every state data"),
        (
            ["analyze", "elman", "-o", "no/such/folder"],
            "output folder 'no/such/folder' does not exist, nor does its parent 'no/such'",
        ),
        (["analyze", "elman", "-o", "README.md"], "-o: 'README.md' is not a folder"),
        (["analyze", "elman", "--scale", "0"], "argument --scale: expected a positive number, got '0'"),
        (["analyze", "elman", "--scale", "nan"], "argument --scale"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(argv, says, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code, out, err = run_main(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(("bptt analyze: error: ", "bptt: error: ")) and says in err, err


def test_missing_matplotlib_in_process(monkeypatch, capsys, tmp_path):
    """With matplotlib unimportable: the CLI's one line before any measuring, the notebook shows no PNG."""
    for module in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)
    measured = []
    monkeypatch.setattr(analysis, "analyze", lambda *args, **kwargs: measured.append(args))
    code, out, err = run_main(["analyze", "linear", "-o", str(tmp_path)], capsys)
    assert (code, out, err, measured) == (2, "", f"bptt analyze: error: {plots.MISSING}\n", [])
    monkeypatch.undo()
    for module in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)
    code, out, err = run_main(["analyze", "linear", "--steps", "2"], capsys)  # the tables need no matplotlib
    assert code == 0 and err == "" and "Gradient norms against the distance T - t" in out
    with pytest.raises(plots.MissingMatplotlib, match=r"bptt\[plots\]"):
        plots.require()


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_draws_on_a_terminal_after_a_delay_and_clears():
    now = [0.0]
    stream = Terminal()
    bar = plots.ProgressBar("run", stream, width=10, delay=0.5, clock=lambda: now[0])
    bar(1, 4)
    assert stream.getvalue() == ""  # quick so far: nothing drawn
    now[0] = 0.6
    bar(2, 4)
    assert stream.getvalue() == "\rrun [#####.....] 2/4"
    bar(4, 4)
    assert stream.getvalue().endswith("\r" + " " * len("run [#####.....] 4/4") + "\r")
    quick = Terminal()
    fast = plots.ProgressBar("run", quick, clock=lambda: 0.0)
    fast(3, 3)
    assert quick.getvalue() == ""


def test_cli_draws_the_bar_only_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(plots, "ProgressBar", functools.partial(plots.ProgressBar, delay=0))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(["analyze", "linear", "--steps", "3", "--radius", "1,2"]) == 0
    assert terminal.getvalue().startswith("\rbptt analyze linear [") and "] 1/6" in terminal.getvalue()
    assert "] 5/6\r" in terminal.getvalue() and terminal.getvalue().endswith(" \r")  # cleared when done


def plotted(figure):
    """{gid: data} of every artist that carries one: (x, y) of a line, the offsets of a scatter, bar heights."""
    data = {}
    for artist in figure.findobj(lambda a: bool(a.get_gid())):
        gid = artist.get_gid()
        if hasattr(artist, "get_xdata"):
            data[gid] = (list(artist.get_xdata()), list(artist.get_ydata()))
        elif hasattr(artist, "get_offsets"):
            offsets = np.asarray(artist.get_offsets())
            data[gid] = (list(offsets[:, 0]), list(offsets[:, 1]))
        else:  # a bar: one rectangle each
            xs, heights = data.get(gid, ([], []))
            data[gid] = (xs + [artist.get_x()], heights + [artist.get_height()])
    return data


@pytest.mark.parametrize("name", ["linear", "lstm"])
def test_the_data_behind_each_plot_is_its_table(name):
    """Each plotted series is the table's column over the rows it names; every measured column is plotted."""
    result = analysis.analyze(load(name), 5, 0, (0.5, 1.5))
    figures = plots.figures(result)
    for table in result.tables:
        data = plotted(figures[table.name])
        assert data, table.name
        covered = set()
        for gid, (xs, ys) in data.items():
            name_, x, y, where = gid.split("\t")
            assert name_ == table.name
            conditions = dict(item.split("=", 1) for item in where.split(";") if item)
            rows = [
                row
                for row in table.rows
                if all(row[table.columns.index(c)] == ast.literal_eval(v) for c, v in conditions.items())
            ]
            column = [row[table.columns.index(y)] for row in rows]
            if x in ("", "radius"):  # a horizontal line at g_max, or bars at positions 0, 1, ...
                assert ys == (column[:1] * 2 if x == "" else column)
            else:
                assert (xs, ys) == ([row[table.columns.index(x)] for row in rows], column), gid
            covered.add((y, tuple(sorted(conditions.items()))))
        skipped = ("radius", "T-t", "k", "matrix", "re", "abs", "gate_bias", "step_radius")  # step_radius: a legend's
        numeric = [c for c in table.columns if c not in skipped]
        assert {c for c, _ in covered} >= set(numeric), table.name
        assert tuple(np.round(figures[table.name].get_size_inches() * figures[table.name].dpi)) == plot_size(table)


def latex_rows(latex):
    assert latex.startswith("$$\\begin{aligned}\n") and latex.endswith("\n\\end{aligned}$$")
    return latex.removeprefix("$$\\begin{aligned}\n").removesuffix("\n\\end{aligned}$$").split(" \\\\\n")


def test_notebook_derivation_shows_markdown_and_latex(tmp_path):
    """Every section's title, then each equation's rows; an equation whose left-hand side another of its section
    shares (the truncation variants of dL/dh_t) comes after a row with its own label, the head of its sentence."""
    view = derive_for_notebook("elman")
    assert view._repr_markdown_() == document(load("elman"), "md")
    latex = view._repr_latex_()
    rows = iter(latex_rows(latex))
    labelled = {}
    for section in view.sections:
        assert next(rows) == f"&\\textrm{{{section.title}}}"
        shared = [eq.lhs for eq in section.equations]
        for eq in section.equations:
            if shared.count(eq.lhs) > 1:
                label = next(rows)
                assert label.startswith("&\\quad\\text{") and label.endswith(":}") and label.count("$") % 2 == 0
                labelled.setdefault((section.title, eq.lhs), []).append(label)
                assert label.removeprefix("&\\quad\\text{").removesuffix(":}") in eq.why
            found = [next(rows) for _ in range(max(1, len(eq.rows)))]
            assert found[0].startswith(f"{eq.lhs} &= ") and all(row.count("&") == 1 for row in found), eq.lhs
    assert next(rows, None) is None
    truncated = [labels for (title, _), labels in labelled.items() if title.startswith("Truncated")]
    assert truncated and all(len(labels) == len(set(labels)) >= 2 for labels in truncated), labelled
    program = shutil.which("pdflatex")
    if program is None:
        pytest.fail("pdflatex is not installed: apt-get install texlive-latex-base")
    tex = tmp_path / "notebook.tex"
    tex.write_text(
        "\\documentclass{article}\\usepackage{amsmath,amssymb}\\begin{document}\n" + latex + "\n\\end{document}\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [program, "-interaction=nonstopmode", "-halt-on-error", tex.name], cwd=tmp_path, capture_output=True
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert derive_for_notebook(load("linear")).model.name == "linear"  # a Model works as well as a name


def test_a_derivation_for_a_notebook_is_derived_once(monkeypatch):
    """derive(...) derives the model once; its Markdown and LaTeX are printed from the sections it holds."""
    calls = []
    real = document_module.derived
    monkeypatch.setattr(document_module, "derived", lambda model: calls.append(model.name) or real(model))
    view = derive_for_notebook("linear")
    assert "<svg" in view._repr_markdown_() and view._repr_latex_().startswith("$$")
    assert calls == ["linear"]


class Cells(html.parser.HTMLParser):
    """The text of every <td> and <th>, a list per <tr>; the src of every <img>."""

    def __init__(self, text):
        super().__init__()
        self.rows, self.images, self.inside = [], [], False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.rows[-1].append("")
            self.inside = True
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        self.inside = self.inside and tag not in ("td", "th")

    def handle_data(self, data):
        if self.inside:
            self.rows[-1][-1] += data


def test_notebook_analysis_shows_its_plots_in_html_above_folded_tables(monkeypatch):
    """Jupyter shows the richest of text/html, image/png, text/plain: the HTML embeds the PNG of every plot, then
    each table folded under its title; no Markdown competes with it. A Table displays as an HTML table."""
    view = analyze_for_notebook("linear", steps=4, radii=(0.5, 1.5))
    assert not hasattr(view, "_repr_markdown_")
    page = view._repr_html_()
    assert page.startswith("<p>Gradient flow of <b>linear</b>: T = 4, seed 0")
    parsed = Cells(page)
    assert len(parsed.images) == 1 and parsed.images[0].startswith("data:image/png;base64,")
    image = base64.b64decode(parsed.images[0].removeprefix("data:image/png;base64,"))
    assert image == view._repr_png_() and png_size(image) == (1120, 800)  # two rows of two plots
    assert parsed.rows == [row for table in view.tables for row in [list(table.columns), *table.cells()]]
    for table in view.tables:
        assert f"<details><summary>{html.escape(table.title)} ({len(table.rows)} rows)</summary>" in page
    clipping = view.table("clipping")
    own = Cells(clipping._repr_html_())
    assert own.rows == [list(clipping.columns), *clipping.cells()] and "<caption>" in clipping._repr_html_()
    for module in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)
    bare = analyze_for_notebook("linear", steps=2, radii=(1.0,))
    assert bare._repr_png_() is None and Cells(bare._repr_html_()).images == []
    assert html.escape(plots.MISSING) in bare._repr_html_()
    assert view._repr_png_() == image  # drawn once, kept


NO_MATRIX = """
from bptt.derive.model import Model, matrix, sequence, sizes
from bptt.derive.nodes import SquaredError, t, tanh


def leaky():
    d, h, q = sizes("d h q")
    U, V = matrix("U", h, d), matrix("V", q, h)
    x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
    o, y = sequence("o", q, "output"), sequence("y", q, "target")
    return Model(
        name="leaky", title="No recurrent matrix", source="a test", sizes=(d, h, q), params=(U, V), inputs=(x,),
        steps=((hidden, tanh(U * x() + hidden(t - 1))),), outputs=((o, V * hidden()),), loss=SquaredError(o(), y()),
    )
"""


def test_a_cell_without_a_recurrent_matrix_is_a_usage_error(tmp_path, capsys):
    """h_t = tanh(U x_t + h_{t-1}): the gradient flows, but there is no matrix to scale to a spectral radius."""
    (tmp_path / "leaky.py").write_text(NO_MATRIX, encoding="utf-8")
    code, out, err = run_main(["analyze", f"{tmp_path / 'leaky.py'}:leaky"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "leaky: no square matrix multiplies a state read at t-1" in err


def test_the_bound_past_the_largest_float_is_inf_not_an_error():
    """(gamma sigma_max(W))^(T-t) at a long T: Python's float power raised OverflowError, which ended `bptt analyze
    elman --steps 2000` with an internal error (exit 3); past the largest float the bound is inf."""
    import sympy as sp

    from bptt.derive.flow import Bound

    W = sp.MatrixSymbol("W", 2, 2)
    bound = Bound(gamma=1, slopes=(), matrices=(W,))
    values = analysis.bound_values(bound, {"W": np.diag([3.0, 1.0])}, [1, 2, 600, 2000])
    assert values[:2] == [3.0, 9.0] and values[2] == pytest.approx(3.0**600) and values[3] == np.inf
