"""The notebook API in a real IPython kernel, run by nbclient as Jupyter runs a notebook: what each cell's output
offers, by MIME type. Jupyter shows the richest type it has (HTML before Markdown before PNG), so an analysis must
offer HTML with its plots embedded and no Markdown, a table HTML, a derivation Markdown and LaTeX."""

import base64
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CELLS = (
    "from bptt.notebook import analyze, derive\nview = analyze('linear', steps=3, radii=(0.5, 1.5))\nview",
    "view.table('clipping')",
    "derive('linear')",
)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # a kernel's start and imports: about 10 s
def test_a_notebook_shows_plots_tables_and_labelled_derivations(tmp_path):
    import nbformat  # here: Jupyter's client (0.5 s of imports) only in the worker that runs this test
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    results = []
    for cell in notebook.cells:
        assert [out for out in cell.outputs if out.output_type == "error"] == [], cell.source
        found = [out for out in cell.outputs if out.output_type == "execute_result"]
        assert len(found) == 1, cell.outputs
        results.append(found[0].data)
    analysis, table, derivation = results

    assert set(analysis) == {"text/plain", "text/html", "image/png"}  # no Markdown to outrank the plots
    page = analysis["text/html"]
    embedded = page.split('<img src="data:image/png;base64,', 1)[1].split('"', 1)[0]
    assert base64.b64decode(embedded) == base64.b64decode(analysis["image/png"])
    assert base64.b64decode(embedded).startswith(PNG)
    assert page.count("<details>") == 4 and page.count("<table>") == 4

    assert set(table) == {"text/plain", "text/html"}
    assert table["text/html"].startswith("<table><caption>Global gradient norm before and after clipping")
    assert table["text/html"].count("<tr>") == 1 + 2  # the header and one row per radius

    assert {"text/markdown", "text/latex"} <= set(derivation)
    assert derivation["text/latex"].count("&\\quad\\text{") >= 2  # the labelled truncation variants
    nbformat.validate(notebook)
