"""The `bptt` command line, run as a user runs it: in a subprocess."""

import concurrent.futures
import functools
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from derive.models import names

REPO = pathlib.Path(__file__).resolve().parents[1]
GENERATED = REPO / "generated"
ZOO = tuple(names())  # elman, linear, and any model added to the zoo
# What `bptt check` must report for each zoo model: every parameter and the initial state.
ROWS = {"linear": ("W_hx", "W_hh", "W_qh", "h0"), "elman": ("U", "W", "V", "b", "c", "h0")}

# A user's model: derive/models/elman.py with a sigmoid activation and another name.
USER_MODELS = textwrap.dedent(
    '''
    """Models a user writes outside the zoo."""

    from derive.model import Model, labels, matrix, sequence, sizes, vector
    from derive.nodes import Softmax, SoftmaxCrossEntropy, sigmoid, t


    def make(name):
        d, h, q = sizes("d h q")
        U, W, V = matrix("U", h, d), matrix("W", h, h), matrix("V", q, h)
        b, c = vector("b", h), vector("c", q)
        x, a, hidden = sequence("x", d, "input"), sequence("a", h, "intermediate"), sequence("h", h, "state")
        s, o, y = sequence("s", q, "output"), sequence("o", q, "intermediate"), labels("y", q)
        return Model(
            name=name,
            title="Elman RNN with a sigmoid activation",
            source="a test of user models",
            sizes=(d, h, q),
            params=(U, W, V, b, c),
            inputs=(x,),
            steps=((a, b + W * hidden(t - 1) + U * x()), (hidden, sigmoid(a()))),
            outputs=((s, c + V * hidden()),),
            loss=SoftmaxCrossEntropy(s(), y()),
            names=((o, Softmax(s())),),
        )


    def sigmoid_rnn():
        return make("sigmoid-rnn")


    def named_linear():
        return make("linear")


    def escaping():
        return make("../escaped")
    '''
)

# A model reading the input x at t-1: only states may be read at t-1.
READS_INPUT_AT_T_MINUS_1 = textwrap.dedent(
    """
    from derive.model import Model, matrix, sequence, sizes
    from derive.nodes import GenericLoss, t


    def f():
        d, h, q = sizes("d h q")
        W_hx, W_hh, W_qh = matrix("W_hx", h, d), matrix("W_hh", h, h), matrix("W_qh", q, h)
        x, hidden = sequence("x", d, "input"), sequence("h", h, "state")
        o, y = sequence("o", q, "output"), sequence("y", q, "target")
        return Model(
            name="late",
            title="Reads x at t-1",
            source="a test",
            sizes=(d, h, q),
            params=(W_hx, W_hh, W_qh),
            inputs=(x,),
            steps=((hidden, W_hx * x(t - 1) + W_hh * hidden(t - 1)),),
            outputs=((o, W_qh * hidden()),),
            loss=GenericLoss(o(), y()),
        )
    """
)


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "BPTT_DEBUG"}  # BPTT_DEBUG turns errors into tracebacks
    env.update(extra)
    return env


def bptt(*args, cwd=REPO, env=None):
    """Run `python -m codegen ARGS`."""
    return subprocess.run(
        [sys.executable, "-m", "codegen", *map(str, args)],
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@functools.cache
def cached(*args):
    """bptt(*args) for invocations that depend on nothing but the repository, run once per session."""
    return bptt(*args)


def run_all(invocations):
    """{args: bptt(*args)} for many invocations, run side by side to use every core."""
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return dict(zip(invocations, pool.map(lambda args: bptt(*args), invocations), strict=True))


def python(script, cwd=REPO):
    """Run a small Python script; its stdout."""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def assert_ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr


def assert_user_error(result, *fragments, one_line=False):
    """Exit 2, a readable message on stderr naming the fragments, nothing on stdout, no traceback."""
    assert result.returncode == 2, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    assert "error" in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, f"{fragment!r} not in {result.stderr!r}"
    if one_line:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def table_rows(stdout):
    """{first word: whole line} for the lines of a `bptt check` table."""
    return {line.split()[0]: line for line in stdout.splitlines() if line.strip()}


def assert_all_rows_ok(stdout, names):
    rows = table_rows(stdout)
    assert "parameter" in rows, stdout  # the header
    for name in names:
        assert name in rows, f"no row for {name}:\n{stdout}"
        assert " ok" in rows[name] and "FAIL" not in rows[name], rows[name]
    assert "FAIL" not in stdout


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "user_models.py"
    path.write_text(USER_MODELS, encoding="utf-8")
    return path


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
    """The installed `bptt` script is the same program as `python -m codegen`."""
    script = shutil.which("bptt")
    assert script, "the `bptt` console script is not on PATH: run pip install -e '.[test]'"
    result = subprocess.run([script, "models"], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
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
    """-o writes the file and nothing on stdout; the format follows --format, else the suffix."""
    cases = [
        ("linear.tex", (), "tex"),
        ("linear.md", (), "md"),  # no --format: .md means Markdown
        ("other.txt", ("--format", "md"), "md"),
        ("forced.md", ("--format", "tex"), "tex"),  # --format wins over the suffix
    ]
    for name, options, fmt in cases:
        result = bptt("latex", "linear", "-o", tmp_path / name, *options)
        assert_ok(result)
        assert result.stdout == "", name
        expected = latex_outputs[("latex", "linear") if fmt == "tex" else ("latex", "linear", "--format", "md")].stdout
        assert (tmp_path / name).read_text(encoding="utf-8") == expected, name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(name for name, _, _ in cases)  # no temporary left


# ---------------------------------------------------------------- codegen


def committed_modules():
    return {p.name: p.read_bytes() for p in GENERATED.glob("*.py") if p.name != "__init__.py"}


def test_codegen_is_byte_identical_to_the_committed_modules(tmp_path):
    """Regenerating every zoo model reproduces generated/<model>.py byte for byte, twice."""
    committed = committed_modules()
    assert sorted(committed) == sorted(name.replace("-", "_") + ".py" for name in ZOO)
    for run in ("first", "second"):
        out = tmp_path / run
        out.mkdir()
        result = bptt("codegen", "--out", out)
        assert_ok(result)
        written = {p.name: p.read_bytes() for p in out.iterdir()}
        assert sorted(written) == sorted(committed), "unexpected or temporary files in --out"
        for name, text in committed.items():
            assert written[name] == text, f"{run} regeneration of {name} differs from generated/{name}"
            assert str(out / name) in result.stdout, f"stdout does not name {out / name}"
    for name in committed:
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()


def test_codegen_check_passes_on_the_committed_tree():
    """`codegen --check` exits 0 on generated/ as committed and changes nothing."""
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in GENERATED.iterdir()}
    result = bptt("codegen", "--check")
    assert_ok(result)
    assert "stale" not in result.stdout
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in GENERATED.iterdir()} == before


def test_codegen_writes_only_the_named_models_and_check_names_the_missing_one(tmp_path):
    """`codegen linear` writes linear.py alone; `--check` then exits 1 naming elman.py, which stays missing."""
    assert_ok(bptt("codegen", "linear", "--out", tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["linear.py"]

    result = bptt("codegen", "--check", "--out", tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert str(tmp_path / "elman.py") in result.stdout
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
    assert str(edited) in result.stdout
    assert "linear.py" not in result.stdout
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
    """Multiply the gradient of `name` returned by backward() by `factor` in a generated module's source."""
    source = path.read_text(encoding="utf-8")
    start = source.index("\ndef backward(")
    end = source.index("\ndef ", start + 1)
    body, count = re.subn(rf'^(\s*"{name}": )(.*),$', rf"\g<1>{factor} * (\g<2>),", source[start:end], flags=re.M)
    assert count == 1, f"no single gradient line for {name} in backward() of {path}"
    path.write_text(source[:start] + body + source[end:], encoding="utf-8")


def test_check_function_flags_a_corrupted_gradient(tmp_path):
    """codegen.check.check on a copy with dL/dW_hh scaled by 1.01 fails W_hh and only W_hh."""
    assert_ok(bptt("codegen", "linear", "--out", tmp_path))
    corrupt(tmp_path / "linear.py")
    script = textwrap.dedent(
        f"""
        import importlib.util, json
        from codegen.check import check
        spec = importlib.util.spec_from_file_location("corrupted_linear", {str(tmp_path / "linear.py")!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(json.dumps({{row.name: row.ok for row in check(module)}}))
        """
    )
    verdicts = json.loads(python(script))
    assert verdicts == {"W_hx": True, "W_hh": False, "W_qh": True, "h0": True}


def test_check_command_exits_1_on_a_corrupted_module(tmp_path):
    """`bptt check linear` exits 1 naming W_hh when `generated` resolves to a corrupted copy.

    The copy shadows the package through PYTHONPATH; the repository is not touched."""
    shadow = tmp_path / "shadow" / "generated"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("", encoding="utf-8")
    assert_ok(bptt("codegen", "linear", "--out", shadow))
    corrupt(shadow / "linear.py")
    pythonpath = os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")]))
    result = bptt("check", "linear", cwd=tmp_path, env=_env(PYTHONPATH=pythonpath))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    rows = table_rows(result.stdout)
    assert "FAIL" in rows["W_hh"]
    assert all("FAIL" not in rows[name] for name in ("W_hx", "W_qh", "h0"))
    assert "FAILED: W_hh" in result.stdout


# ---------------------------------------------------------------- usage errors


USAGE_ERRORS = [
    (("check", "nosuch"), ("nosuch", "elman", "linear")),
    (("latex", "nosuch"), ("nosuch", "elman", "linear")),
    (("codegen", "nosuch"), ("nosuch", "elman", "linear")),
    (("check", "linear", "--steps", "0"), ("--steps",)),
    (("check", "linear", "--steps", "abc"), ("--steps", "abc")),
    (("check", "linear", "--batch", "-1"), ("--batch",)),
    (("check", "linear", "--dtype", "float16"), ("--dtype", "float16")),
    (("check", "linear", "--seed", "x"), ("--seed",)),
    (("check", "linear", "--sizes", "d=0,h=3,q=4"), ("--sizes", "d=0")),
    (("check", "linear", "--sizes", "q=3"), ("--sizes", "missing")),
    (("check", "linear", "--sizes", "d=3,h=4,q=5,z=6"), ("--sizes", "z=6")),
    (("check", "linear", "--sizes", "d=3,h=four,q=5"), ("--sizes", "four")),
    (("latex", "linear", "--format", "pdf"), ("--format", "pdf")),
    ((), ("usage: bptt",)),
    (("codegen", "--out", "/nonexistent"), ("/nonexistent",)),
]


@pytest.fixture(scope="module")
def usage_errors():
    return run_all([args for args, _ in USAGE_ERRORS])


@pytest.mark.parametrize(
    "args, fragments", USAGE_ERRORS, ids=[" ".join(args) or "no command" for args, _ in USAGE_ERRORS]
)
def test_usage_error(args, fragments, usage_errors):
    """Bad input exits 2 with a message saying what is wrong, and no traceback."""
    assert_user_error(usage_errors[args], *fragments)


def test_latex_into_a_missing_folder_is_a_usage_error(tmp_path):
    """`latex -o missing/x.tex` is a bad option value like `codegen --out missing`: exit 2, naming the path."""
    target = tmp_path / "missing" / "x.tex"
    result = bptt("latex", "linear", "-o", target)
    assert_user_error(result, str(target.parent))
    assert not target.parent.exists()


# ---------------------------------------------------------------- a user's model file


def test_user_model_latex(user_file):
    """`latex path.py:function` derives a model from a user's file."""
    result = bptt("latex", f"{user_file}:sigmoid_rnn")
    assert_ok(result)
    assert result.stdout.startswith("\\documentclass")
    assert "Elman RNN with a sigmoid activation" in result.stdout
    assert "\\tanh" not in result.stdout and "\\sigma" in result.stdout


def test_user_model_codegen_writes_a_module_that_runs(user_file, tmp_path):
    """`codegen path.py:function --out DIR` writes sigmoid_rnn.py, which imports and runs a sigmoid RNN."""
    out = tmp_path / "out"
    out.mkdir()
    assert_ok(bptt("codegen", f"{user_file}:sigmoid_rnn", "--out", out))
    assert [p.name for p in out.iterdir()] == ["sigmoid_rnn.py"]
    script = textwrap.dedent(
        f"""
        import importlib.util, json
        import numpy as np
        spec = importlib.util.spec_from_file_location("sigmoid_rnn", {str(out / "sigmoid_rnn.py")!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        rng = np.random.default_rng(0)
        sizes = dict(d=3, h=4, q=5)
        params = module.init_params(rng, **sizes)
        xs, ys = module.random_inputs(rng, 6, 2, **sizes)
        loss, grads = module.loss_and_grads(params, xs, ys)
        _, cache = module.forward(params, xs)
        print(json.dumps(dict(
            loss=float(loss),
            grads={{k: list(v.shape) for k, v in grads.items()}},
            finite=all(bool(np.isfinite(g).all()) for g in grads.values()),
            h_min=float(cache["h"][1:].min()), h_max=float(cache["h"][1:].max()),
        )))
        """
    )
    ran = json.loads(python(script))
    assert ran["loss"] > 0 and ran["finite"]
    assert ran["grads"] == {"U": [4, 3], "W": [4, 4], "V": [5, 4], "b": [4], "c": [5], "h0": [2, 4]}
    assert 0 < ran["h_min"] and ran["h_max"] < 1, "hidden states of a sigmoid RNN lie in (0, 1)"


def test_user_model_check(user_file):
    """`check path.py:function` checks the user's model and exits 0."""
    result = bptt("check", f"{user_file}:sigmoid_rnn")
    assert_ok(result)
    assert result.stdout.startswith("sigmoid-rnn")
    assert_all_rows_ok(result.stdout, ROWS["elman"])


def test_check_of_a_user_model_named_like_a_zoo_model_checks_the_users_model(user_file):
    """A user's model called "linear" is checked from its own equations, not from generated/linear.py."""
    result = bptt("check", f"{user_file}:named_linear")
    assert_ok(result)
    assert_all_rows_ok(result.stdout, ("U", "W", "V", "b", "c", "h0"))
    assert "W_hx" not in result.stdout


def test_codegen_never_writes_outside_out(user_file, tmp_path):
    """A model whose name is not a module name ("../escaped") is refused, nothing written anywhere."""
    out = tmp_path / "out"
    out.mkdir()
    result = bptt("codegen", f"{user_file}:escaping", "--out", out)
    assert not (tmp_path / "escaped.py").exists(), "codegen wrote outside --out"
    assert_user_error(result, "escaped")
    assert list(out.iterdir()) == []


MALFORMED = {
    "missing file": (None, "f", "nofile.py"),
    "syntax error": ("def f(:\n    pass\n", "f", "SyntaxError"),
    "missing function": ("def f():\n    pass\n", "nope", "nope"),
    "not a model": ("def f():\n    return 42\n", "f", "Model"),
    "raises": ("def f():\n    raise RuntimeError('boom')\n", "f", "boom"),
    "non-state at t-1": (READS_INPUT_AT_T_MINUS_1, "f", "t-1"),
}


@pytest.fixture(scope="module")
def malformed(tmp_path_factory):
    """{case: (`codegen linear BAD --out DIR` result, DIR)} plus {("latex" or "check", "non-state at t-1"): result}."""
    root = tmp_path_factory.mktemp("malformed")
    specs, outs, runs = {}, {}, {}
    for n, (case, (content, function, _)) in enumerate(MALFORMED.items()):
        path = root / ("nofile.py" if content is None else f"bad{n}.py")
        if content is not None:
            path.write_text(content, encoding="utf-8")
        specs[case] = f"{path}:{function}"
        outs[case] = root / f"out{n}"
        outs[case].mkdir()
        runs[case] = ("codegen", "linear", specs[case], "--out", outs[case])
    for command in ("latex", "check"):
        runs[command, "non-state at t-1"] = (command, specs["non-state at t-1"])
    results = run_all(list(runs.values()))
    return {key: (results[args], outs.get(key)) for key, args in runs.items()}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_user_file_in_codegen(case, malformed):
    """`codegen linear BAD --out DIR`: exit 2, one line, and DIR stays empty (linear.py is not written either)."""
    result, out = malformed[case]
    assert_user_error(result, MALFORMED[case][2], one_line=True)
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("command", ["latex", "check"])
def test_malformed_user_file_in_latex_and_check(command, malformed):
    """latex and check report a bad user model the same way: exit 2, one line, no traceback."""
    result, _ = malformed[command, "non-state at t-1"]
    assert_user_error(result, "t-1", one_line=True)
