"""The `bptt` command line, run as a user runs it: listing, help, latex, codegen and check."""

import pathlib
import re
import shutil
import subprocess

import pytest

from bptt.app.bench.measuring import THREADS
from bptt.app.start import one_thread
from bptt.app.verify.check import check
from bptt.codegen.backends import BACKENDS
from bptt.tests.support.cli import (
    GENERATED,
    REPO,
    ROWS,
    ZOO,
    assert_all_rows_ok,
    assert_ok,
    bptt,
    cached,
    clean_env,
    load_file,
    pythonpath,
    run_all,
    shadow_package,
    table_rows,
)

# ---------------------------------------------------------------- models and --help


def test_models_lists_the_zoo():
    """`bptt models` prints a line per zoo model: its name, then its title."""
    result = cached("models")
    assert_ok(result)
    lines = result.stdout.splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(ZOO)
    assert {"elman", "linear"} <= set(ZOO)
    assert all(len(line.split()) > 1 for line in lines), "each line should carry a title after the name"
    assert result.stderr == ""


def test_console_script_matches_python_m():
    """The installed `bptt` script is the same program as `python -m bptt`."""
    script = shutil.which("bptt")
    assert script, "the `bptt` console script is not on PATH: run pip install -e '.[test]'"
    result = subprocess.run([script, "models"], cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert_ok(result)
    assert result.stdout == cached("models").stdout
    assert result.stdout  # not two empty outputs


HELP = {
    (): ("models", "latex", "codegen", "check"),
    ("models",): ("usage: bptt models",),
    ("latex",): ("model", "--output", "--format", "tex", "md"),
    ("codegen",): ("MODEL", "--check", "--out"),
    ("check",): ("model", "--steps", "--batch", "--seed", "--dtype", "float32", "--sizes"),
}


@pytest.fixture(scope="module")
def helps():
    return run_all([(*command, "--help") for command in HELP])


@pytest.mark.parametrize("command", HELP, ids=lambda command: " ".join(command) or "bptt")
def test_help(command, helps):
    """--help exits 0 and explains the command's arguments and options."""
    result = helps[(*command, "--help")]
    assert_ok(result)
    assert result.stdout.startswith("usage: bptt")
    for word in HELP[command]:
        assert word in result.stdout, f"{word!r} not in the help of {command}"
    assert result.stderr == ""


# ---------------------------------------------------------------- latex


@pytest.fixture(scope="module")
def latex_outputs():
    return run_all(
        [("latex", model, *options) for model in ("linear", "elman") for options in ((), ("--format", "md"))]
    )


@pytest.mark.parametrize("model", ["linear", "elman"])  # test_latex_compiles.py covers the whole zoo
def test_latex_to_stdout(model, latex_outputs):
    """A standalone LaTeX document by default; Markdown with $$ blocks with --format md."""
    tex = latex_outputs["latex", model]
    assert_ok(tex)
    assert tex.stdout.startswith("\\documentclass")
    assert "\\begin{document}" in tex.stdout
    assert tex.stdout.rstrip().endswith("\\end{document}")

    md = latex_outputs["latex", model, "--format", "md"]
    assert_ok(md)
    assert md.stdout.count("$$") >= 2
    assert "\\documentclass" not in md.stdout and "\\begin{document}" not in md.stdout
    assert md.stdout != tex.stdout


def test_latex_to_file(tmp_path, latex_outputs):
    """-o writes the file and nothing on stdout; the format follows --format, else the suffix. Markdown written
    to a file links each figure as an SVG file beside it (GitHub's renderer drops inline SVG): the same text as
    on stdout, each inline <svg> replaced by an image of the file that holds it."""
    cases = [
        ("linear.tex", (), "tex"),
        ("linear.md", (), "md"),  # no --format: .md means Markdown
        ("other.txt", ("--format", "md"), "md"),
        ("forced.md", ("--format", "tex"), "tex"),  # --format wins over the suffix
    ]
    made = []
    for name, options, fmt in cases:
        result = bptt("latex", "linear", "-o", tmp_path / name, *options)
        assert_ok(result)
        assert result.stdout == "", name
        expected = latex_outputs[("latex", "linear") if fmt == "tex" else ("latex", "linear", "--format", "md")].stdout
        written = (tmp_path / name).read_text(encoding="utf-8")
        made.append(name)
        if fmt == "tex":
            assert written == expected, name
            continue
        inline = re.findall(r"<svg .*?</svg>", expected, re.S)
        text, *linked = re.split(r"!\[[^\]]*\]\(([^)]*)\)", written)
        files = [f"{pathlib.Path(name).stem}-figure-{n}.svg" for n in range(1, len(inline) + 1)]
        assert len(inline) == 2 and "<svg" not in written and linked[::2] == files, name
        assert [(tmp_path / f).read_text(encoding="utf-8") for f in files] == inline
        assert [text, *linked[1::2]] == re.split(r"<svg .*?</svg>", expected, flags=re.S)
        made += files
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(made)  # no temporary left


# ---------------------------------------------------------------- codegen


def committed_modules():
    return {p.name: p.read_bytes() for p in GENERATED.glob("*.py") if p.name != "__init__.py"}


def test_codegen_is_byte_identical_to_the_committed_modules(tmp_path):
    """Regenerating every zoo model for every backend reproduces generated/<model>[_<backend>].py byte for
    byte, twice."""
    committed = committed_modules()
    assert sorted(committed) == sorted(b.filename(name) for name in ZOO for b in BACKENDS.values())
    for run in ("first", "second"):
        out = tmp_path / run
        out.mkdir()
        result = bptt("codegen", "--backend", "all", "--out", out)
        assert_ok(result)
        written = {p.name: p.read_bytes() for p in out.iterdir()}
        assert sorted(written) == sorted(committed), "unexpected or temporary files in --out"
        for name, text in committed.items():
            assert written[name] == text, f"{run} regeneration of {name} differs from generated/{name}"
            assert str(out / name) in result.stdout, f"stdout does not name {out / name}"
    for name in committed:
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()


def test_codegen_check_passes_on_the_committed_tree():
    """`codegen --check` (in the checkout, no --out: generated/) exits 0 on the committed tree and changes nothing."""
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in GENERATED.iterdir()}
    result = bptt("codegen", "--check")
    assert_ok(result)
    assert result.stdout == ""
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in GENERATED.iterdir()} == before


def test_codegen_writes_only_the_named_models_and_check_names_the_missing_one(tmp_path):
    """`codegen linear` writes linear.py alone; `--check` then exits 1 naming elman.py, which stays missing."""
    assert_ok(bptt("codegen", "linear", "--out", tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["linear.py"]

    result = bptt("codegen", "--check", "--out", tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"missing: {tmp_path / 'elman.py'}" in result.stdout.splitlines()
    assert f"run `bptt codegen --out {tmp_path}` to regenerate" in result.stdout.splitlines()
    assert "linear.py" not in result.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["linear.py"]

    assert_ok(bptt("codegen", "--check", "linear", "--out", tmp_path))  # only the named model is checked


def test_codegen_check_names_a_modified_file_and_leaves_it(tmp_path):
    """A hand-edited module is reported stale (exit 1) and left as it is, fresh ones are not named."""
    assert_ok(bptt("codegen", "--out", tmp_path))
    edited = tmp_path / "elman.py"
    edited.write_text(edited.read_text(encoding="utf-8") + "# edited by hand\n", encoding="utf-8")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}

    result = bptt("codegen", "--check", "--out", tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout.splitlines() == [f"stale: {edited}", f"run `bptt codegen --out {tmp_path}` to regenerate"]
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before

    assert_ok(bptt("codegen", "--check", "linear", "--out", tmp_path))


def test_written_files_have_ordinary_permissions(tmp_path):
    """Generated modules and documents get the mode any new file gets (umask), not mkstemp's 0600."""
    reference = tmp_path / "reference"
    reference.write_text("", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    assert_ok(bptt("codegen", "linear", "--out", out))
    assert_ok(bptt("latex", "linear", "-o", tmp_path / "linear.tex"))
    expected = oct(reference.stat().st_mode & 0o777)
    assert oct((out / "linear.py").stat().st_mode & 0o777) == expected, "codegen"
    assert oct((tmp_path / "linear.tex").stat().st_mode & 0o777) == expected, "latex -o"


# ---------------------------------------------------------------- check


@pytest.mark.parametrize("model", ["linear", "elman"])
def test_check_zoo_model(model):
    """`check MODEL` exits 0 with an ok row for every parameter and h0."""
    result = cached("check", model)
    assert_ok(result)
    assert_all_rows_ok(result.stdout, ROWS[model])


def test_check_runs_with_one_thread_unless_the_user_set_one():
    """`bptt check` sets bench's THREADS where the environment has none (before NumPy loads BLAS): a user's own
    setting wins, and the other commands are left as they are."""
    environ = {"OMP_NUM_THREADS": "4"}
    one_thread(["check", "lstm", "--steps", "200"], environ)
    assert environ == {**THREADS, "OMP_NUM_THREADS": "4"}
    for argv in (["latex", "check"], ["bench", "lstm"], []):
        untouched = {}
        one_thread(argv, untouched)
        assert untouched == {}


def test_check_float32():
    """The analytic pass in float32 passes at float32's tolerance."""
    result = bptt("check", "elman", "--dtype", "float32")
    assert_ok(result)
    assert "float32" in result.stdout
    assert_all_rows_ok(result.stdout, ROWS["elman"])


def test_check_takes_every_option():
    """--steps, --batch, --seed and --sizes are used and echoed in the header."""
    result = bptt("check", "linear", "--steps", "2", "--batch", "1", "--seed", "7", "--sizes", "q=3,d=2,h=1")
    assert_ok(result)
    header = result.stdout.splitlines()[0]
    for shown in ("T=2", "B=1", "seed=7", "d=2", "h=1", "q=3"):
        assert shown in header, header
    assert_all_rows_ok(result.stdout, ROWS["linear"])


def corrupt(path, name="W_hh", factor="1.01"):
    """Multiply the gradient of `name` that _gradients() returns by `factor` in a generated module's source."""
    source = path.read_text(encoding="utf-8")
    start = source.index("\ndef _gradients(")
    end = start + 1 + re.search(r"\n(?=\S)", source[start + 1 :]).start()  # the next top-level line
    body, count = re.subn(rf'^(\s*"{name}": )(.*),$', rf"\g<1>{factor} * (\g<2>),", source[start:end], flags=re.M)
    assert count == 1, f"no single gradient line for {name} in _gradients() of {path}"
    path.write_text(source[:start] + body + source[end:], encoding="utf-8")


def test_check_function_flags_a_corrupted_gradient(tmp_path):
    """app.verify.check.check on a copy with dL/dW_hh scaled by 1.01 fails W_hh and only W_hh."""
    assert_ok(bptt("codegen", "linear", "--out", tmp_path))
    corrupt(tmp_path / "linear.py")
    module = load_file(tmp_path / "linear.py", "corrupted_linear")
    verdicts = {row.name: row.ok for row in check(module)}
    assert verdicts == {"W_hx": True, "W_hh": False, "W_qh": True, "h0": True}


def test_check_command_exits_1_on_a_corrupted_module(tmp_path):
    """`bptt check linear` exits 1 naming W_hh when `bptt.generated` resolves to a corrupted copy.

    The copy shadows the package through PYTHONPATH; the repository is not touched."""
    package = shadow_package(tmp_path / "shadow")
    corrupt(package / "generated" / "linear.py")
    result = bptt("check", "linear", cwd=tmp_path, env=pythonpath(package.parent))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    rows = table_rows(result.stdout)
    assert "FAIL" in rows["W_hh"]
    assert all("FAIL" not in rows[name] for name in ("W_hx", "W_qh", "h0"))
    assert "FAILED: W_hh" in result.stdout
