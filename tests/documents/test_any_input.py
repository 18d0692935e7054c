"""Documents for any input: a user's title, source and file path hold characters TeX and Markdown treat
specially and any Unicode; the model's names hold underscores. Each document compiles with pdflatex (once),
its maths renders with KaTeX, its Markdown reads as written with CommonMark's reference parser (one Node.js
process for all), and every name reads as one name."""

import re
import textwrap
import urllib.parse

import pytest

from bptt.tests.support.markdown_read import display_maths, errors, inline_maths, subscripted
from bptt.tests.support.printed import bptt, overfull_lines, pdflatex, side_by_side

TITLES = (
    "R&D <b>not bold</b> | *not italic* _x_ $5 and $10 a--b ''c'' !` ?` `code` [x](y) #1 50% {x} ~y^ \\z \"q\"",
    "Greek α β Ω ά, accents é ü ñ ç å ǘ í, Cyrillic кот, CJK 中文, emoji 😀, ß œ ł, a tab\tand a line\nbreak",
)
# ... and a lone surrogate, as Python decodes a file name's byte that is not UTF-8
SOURCES = ("https://example.org/a_b?c=1&d=2#e (x) <y> | z", "Ελληνικά: ἀρχή, 日本 ‰ § £ \udcff")
# A folder a user might keep models in: Cyrillic, CJK, a space, brackets, a dollar, a backtick.
FOLDER = "модели 中文 (a) [b] $x `q`"
# Names with underscores, as (letters, subscript): the sequences a_mu and x_in, the parameters W_a_mu and
# W_x_in, the size n_mu (which sympy would print as n sub Greek mu). Vβ and y_真 are Python's names too.
NAMES = {"a": "mu", "x": "in", "n": "mu"}
MODEL = textwrap.dedent(
    f"""
    from bptt.derive.model import Model, matrix, sequence, sizes
    from bptt.derive.nodes import GenericLoss, t, tanh


    def make(title, source):
        d, n_mu, q = sizes("d n_mu q")
        W_x_in, W_a_mu, V = matrix("W_x_in", n_mu, d), matrix("W_a_mu", n_mu, n_mu), matrix("Vβ", q, n_mu)
        x_in, a_mu = sequence("x_in", d, "input"), sequence("a_mu", n_mu, "state")
        o, y = sequence("o", q, "output"), sequence("y_真", q, "target")
        return Model(
            name="any-input",
            title=title,
            source=source,
            sizes=(d, n_mu, q),
            params=(W_x_in, W_a_mu, V),
            inputs=(x_in,),
            steps=((a_mu, tanh(W_x_in * x_in() + W_a_mu * a_mu(t - 1))),),
            outputs=((o, V * a_mu()),),
            loss=GenericLoss(o(), y()),
        )


    def marks():
        return make({TITLES[0]!r}, {SOURCES[0]!r})


    def letters():
        return make({TITLES[1]!r}, {SOURCES[1]!r})
    """
)
MODELS = ("marks", "letters")
OUTPUTS = ("ok é.md", "a)b [c].md")  # -o names: a space and a letter outside ASCII, brackets


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(the folder the documents are in, {model: its file's spec}): the models written in FOLDER."""
    root = tmp_path_factory.mktemp("any-input")
    (root / FOLDER).mkdir()
    path = root / FOLDER / "мой файл é.py"
    path.write_text(MODEL, encoding="utf-8")
    return root, {name: f"{path}:{name}" for name in MODELS}


def shown(text):
    """The text as a document shows it in Markdown: line breaks, tabs and lone surrogates as their code points."""
    return text.replace("\t", "U+0009").replace("\n", "U+000A").replace("\udcff", "U+DCFF")


def test_latex_shows_any_text_and_compiles(corpus):
    """Titles, sources and paths with `< > | " $ & % # _ { } ~ ^ \\`, OT1's ligatures, Greek, accents and letters
    the fonts lack: each document compiles with pdflatex, in Computer Modern alone (no font METAFONT must make,
    no missing character), with no line too wide, and its head is plain ASCII commands: `<` as \\textless,
    never a raw `<` that prints as ¡; Greek and accents as themselves; the rest as code points."""
    root, specs = corpus
    texs = [root / f"{name}.tex" for name in MODELS]
    side_by_side(lambda pair: bptt("latex", pair[0], "-o", pair[1]), list(zip(specs.values(), texs, strict=True)))
    logs = side_by_side(lambda tex: pdflatex(tex).log, texs)
    for tex, log in zip(texs, logs, strict=True):
        assert "jknappen" not in log and "Missing character" not in log, f"{tex.name}: a font beyond OT1 and maths"
        assert not overfull_lines(log, tex), overfull_lines(log, tex)  # a long path breaks after its slashes
        head = tex.read_text(encoding="utf-8").partition(r"\section*")[0].partition(r"\begin{center}")[2]
        assert head.isascii() and not re.search(r"[<>|\"]", head.replace(r"\"", "")), head  # \" an umlaut
    marks, letters = (tex.read_text(encoding="utf-8") for tex in texs)
    for shown_as in (r"\textless{}b\textgreater{}", r"\textbar{}", r"$\$$5", r"a-{}-b", r"'{}'c", r"!{}`"):
        assert shown_as in marks
    for shown_as in (r"$\alpha$", r"$\Omega$", r"$\acute{\alpha}$", r"\'{e}", r"\'{\"{u}}", r"\'{\i{}}", r"\ss{}"):
        assert shown_as in letters
    assert r"\texttt{U+4E2D}" in letters and r"\texttt{U+1F600}" in letters and r"\texttt{U+000A}" in letters
    assert r"\texttt{U+043C}" in letters and r"\texttt{U+DCFF}" in letters  # м, of the folder's name in "Derived by"
    assert r"\mathbf{V\beta}" in letters and r"\mathbf{y}_{\textrm{U+771F},t}" in letters  # names outside ASCII


@pytest.fixture(scope="module")
def markdown(corpus):
    """[(the file, its text)]: each model's Markdown, written by `bptt latex SPEC -o NAME` with a name of OUTPUTS."""
    root, specs = corpus
    outputs = [root / name for name in OUTPUTS]
    side_by_side(lambda pair: bptt("latex", pair[0], "-o", pair[1]), list(zip(specs.values(), outputs, strict=True)))
    return [(path, path.read_text(encoding="utf-8")) for path in outputs]


def test_markdown_reads_as_written(corpus, markdown, markdown_reader):
    """The Markdown of the same models, written with -o names that hold a space, brackets and letters outside
    ASCII: CommonMark reads the title and the source as written (no emphasis, no raw HTML, no link; GitHub's
    maths needs an unescaped $, and there is none), the command as one code span, and each figure's link as
    the SVG file written beside the document."""
    root, specs = corpus
    _, documents = markdown_reader([], [text for _, text in markdown])
    for n, ((path, text), read) in enumerate(zip(markdown, documents, strict=True)):
        assert read["headings"][0] == f"Backpropagation through time: {shown(TITLES[n])}"
        spec = specs[MODELS[n]]
        assert read["paragraphs"][0] == f"Derived by bptt latex {spec} --format md. Source: {shown(SOURCES[n])}."
        assert not inline_maths("\n".join(text.splitlines()[:3])), "maths in the title or the source"
        beside = sorted(p.name for p in root.glob(f"{glob_escape(path.stem)}-figure-*.svg"))
        assert beside and sorted(urllib.parse.unquote(d) for d in read["images"]) == beside


def test_maths_renders_with_katex_and_names_read_as_one(markdown, markdown_reader):
    """Every $$ block and inline $...$ of the Markdown renders with KaTeX (throwOnError); in its MathML, each
    name with an underscore is one subscripted name: a_mu is a sub "mu, t", never a sub m then u; n_mu is
    n sub "mu", never n sub μ."""
    formulas = [f for _, text in markdown for f in display_maths(text) + inline_maths(text)]
    assert len(formulas) > 20
    results, _ = markdown_reader(formulas, [])
    refused = errors(formulas, results)
    assert not refused, refused[:3]
    subscripts = [pair for r in results for pair in subscripted(r["mathml"])]
    for letters, sub in NAMES.items():
        found = [s for base, s in subscripts if base == letters]
        assert found, f"no {letters}_{sub} in the maths"
        wrong = [s for s in found if s != sub and not s.startswith(f"{sub},")]
        assert not wrong, f"{letters}_{sub} printed as {letters} sub {wrong}"
    assert ("W", "a_mu") in subscripts and ("W", "x_in") in subscripts


def glob_escape(name):
    return re.sub(r"([\[\]*?])", r"[\1]", name)
