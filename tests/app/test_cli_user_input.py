"""The `bptt` command line with bad input: usage errors, and models from user files, good and malformed."""

import numpy as np
import pytest

from bptt.tests.support.cli import (
    READS_INPUT_AT_T_MINUS_1,
    ROWS,
    UNKNOWN_FUNCTION,
    assert_all_rows_ok,
    assert_ok,
    assert_user_error,
    bptt,
    load_file,
    run_all,
)

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
    ((), ("COMMAND", "bptt --help")),
    (("check",), ("model", "bptt check --help")),
    (("check", "linear", "--nosuch"), ("--nosuch",)),
    (("nosuch",), ("nosuch", "COMMAND")),
    (("codegen", "--out", "/nonexistent/folder"), ("/nonexistent/folder", "/nonexistent")),
]


@pytest.fixture(scope="module")
def usage_errors():
    return run_all([args for args, _ in USAGE_ERRORS])


@pytest.mark.parametrize(
    "args, fragments", USAGE_ERRORS, ids=[" ".join(args) or "no command" for args, _ in USAGE_ERRORS]
)
def test_usage_error(args, fragments, usage_errors):
    """Bad input exits 2 with one line saying what is wrong (argparse's usage block is not printed)."""
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
    assert "\\tanh\\left(" not in result.stdout and "\\sigma\\left(" in result.stdout  # applied, not just named


def test_user_model_codegen_writes_a_module_that_runs(user_file, tmp_path):
    """`codegen path.py:function --out DIR` writes sigmoid_rnn.py, which imports and runs a sigmoid RNN."""
    out = tmp_path / "out"
    out.mkdir()
    assert_ok(bptt("codegen", f"{user_file}:sigmoid_rnn", "--out", out))
    assert [p.name for p in out.iterdir()] == ["sigmoid_rnn.py"]
    module = load_file(out / "sigmoid_rnn.py", "written_sigmoid_rnn")
    rng = np.random.default_rng(0)
    sizes = dict(d=3, h=4, q=5)
    params = module.init_params(rng, **sizes)
    xs, ys = module.random_inputs(rng, 6, 2, **sizes)
    loss, grads = module.loss_and_grads(params, xs, ys)
    _, cache = module.forward(params, xs)
    ran = dict(
        loss=float(loss),
        grads={k: list(v.shape) for k, v in grads.items()},
        finite=all(bool(np.isfinite(g).all()) for g in grads.values()),
        h_min=float(cache["h"][1:].min()),
        h_max=float(cache["h"][1:].max()),
    )
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
    "no rule": (UNKNOWN_FUNCTION, "f", "swish"),
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
    assert_user_error(result, MALFORMED[case][2])
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("command", ["latex", "check"])
def test_malformed_user_file_in_latex_and_check(command, malformed):
    """latex and check report a bad user model the same way: exit 2, one line, no traceback."""
    result, _ = malformed[command, "non-state at t-1"]
    assert_user_error(result, "t-1")
