"""printed.pdflatex compiles a preamble it has seen before on a format holding it (printed.formatted): the same
pages, marks and overfull lines (named by the lines of the .tex) as without, and never another preamble's format."""

from bptt.tests.support.printed import overfull_lines, pdflatex

BODY = r"""\begin{document}
\typeout{marker=\marker}
\section*{One}\label{one}
A line with a word too long for it:
\mbox{\rule{20cm}{1pt}}.

\section*{Two}\label{two}
Text.
\end{document}
"""


def document(folder, name, marker):
    """A small document whose preamble (unique to the folder and marker) defines \\marker."""
    preamble = f"% {folder.name}\n\\documentclass{{article}}\n\\newcommand\\marker{{{marker}}}\n"
    tex = folder / f"{name}.tex"
    tex.write_text(preamble + BODY, encoding="utf-8")
    return tex


def read(printed):
    return printed.pages, printed.marks, overfull_lines(printed.log, printed.tex)


def test_a_format_compiles_what_the_preamble_compiles(tmp_path):
    runs = [pdflatex(document(tmp_path, f"d{n}", "A"), measure=True) for n in range(3)]
    assert "format=pdflatex" in runs[0].log.splitlines()[0]  # the first time: no format made
    assert all("format=preamble" in run.log.splitlines()[0] for run in runs[1:])
    first = read(runs[0])
    assert first[0] == 1 and set(first[1]) == {"one", "two", "end"} and len(first[2]) == 1
    assert "\\mbox{\\rule{20cm}{1pt}}" in first[2][0]  # the line pdflatex named, read back from the .tex
    assert all(read(run) == first for run in runs[1:])


def test_each_preamble_has_its_own_format(tmp_path):
    markers = "ABAB"
    runs = [pdflatex(document(tmp_path, f"d{n}", marker)) for n, marker in enumerate(markers)]
    assert [run.log.count(f"marker={marker}") for run, marker in zip(runs, markers, strict=True)] == [1] * 4
    assert all("format=preamble" in run.log.splitlines()[0] for run in runs[2:])
