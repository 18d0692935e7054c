"""`bptt check MODEL --backend numpy|torch|jax|all`, run as a user runs it: a framework's module against
finite differences of its own loss and against the NumPy module's loss, outputs and gradients (1e-12 in
float64); a planted disagreement exits 1; a missing framework is one line naming the extra."""

import concurrent.futures
import re

import pytest

from bptt.tests.support.cli import USER_MODELS, assert_error, assert_ok, bptt, clean_env, pythonpath, shadow_package

SMALL = ("--steps", "3", "--batch", "2", "--sizes", "d=2,h=3,q=4")
LINEAR = ("W_hx", "W_hh", "W_qh", "h0")  # what bptt check reports for linear
HIDE = "raise ImportError('No module named {0} (hidden by the test)')\n"


def sections(stdout):
    """{header line: {row name: row}} for each backend's part of the output."""
    out, rows = {}, None
    for line in stdout.splitlines():
        if re.match(r"^\S+( \(\w+ module\))?: (full BPTT|truncate=)", line):
            rows = out.setdefault(line, {})
        elif rows is not None and line.strip():
            rows.setdefault(line.split()[0], []).append(line)
    return out


def assert_rows(rows, names, quantities=()):
    """Every parameter in the finite-difference table (and the NumPy table) and every quantity: ok."""
    for name in names:
        expected = 1 if not quantities else 2
        assert len(rows.get(name, ())) == expected, f"{name}: {rows.get(name)}"
        assert all(" ok (tolerance" in row for row in rows[name]), rows[name]
    for name in quantities:
        assert len(rows.get(name, ())) == 1 and " ok (tolerance 1e-12)" in rows[name][0], rows.get(name)


def planted(root):
    """A package whose torch and JAX modules of linear return dL/dW_hh one part in a billion off."""
    package = shadow_package(root)
    for backend in ("torch", "jax"):
        path = package / "generated" / f"linear_{backend}.py"
        source = path.read_text()
        line = next(line for line in source.splitlines() if line.strip().startswith('"W_hh": ') and "h[:-1]" in line)
        path.write_text(source.replace(line, line.replace('"W_hh": ', '"W_hh": (1 + 1e-9) * ', 1), 1))
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The checks, side by side: a user's model on every backend, torch's random truncation, and linear
    with the planted errors."""
    root = tmp_path_factory.mktemp("check")
    user = root / "cells.py"
    user.write_text(USER_MODELS, encoding="utf-8")
    env = clean_env()  # with XLA's fast compile (tests/conftest.py)
    invocations = {
        "user": (("check", f"{user}:sigmoid_rnn", "--backend", "all", *SMALL), env),
        "random": (("check", "elman", "--backend", "torch", "--truncate", "random:0.5", *SMALL), env),
        "planted": (("check", "linear", "--backend", "all", *SMALL), pythonpath(planted(root / "planted"))),
    }
    with concurrent.futures.ThreadPoolExecutor(len(invocations)) as pool:
        futures = {name: pool.submit(bptt, *args, env=env) for name, (args, env) in invocations.items()}
        return {name: future.result() for name, future in futures.items()}


def test_every_backend_checks_a_user_s_model(runs):
    """numpy against finite differences; torch and JAX against finite differences and the NumPy module."""
    result = runs["user"]
    assert_ok(result)
    found = sections(result.stdout)
    headers = [
        f"sigmoid-rnn{which}: full BPTT T=3 B=2 seed=0 dtype=float64 d=2 h=3 q=4"
        for which in ("", " (torch module)", " (jax module)")
    ]
    assert list(found) == headers, result.stdout
    names = ("U", "W", "V", "b", "c", "h0")
    assert_rows(found[headers[0]], names)
    for header in headers[1:]:
        assert_rows(found[header], names, ("loss", "outputs"))
    for backend in ("torch", "jax"):
        assert (
            f"all gradients agree with finite differences, and the {backend} module's loss, outputs and gradients "
            "with the NumPy module's" in result.stdout
        )


def test_randomized_truncation_replays_the_framework_s_draws_into_numpy(runs):
    result = runs["random"]
    assert_ok(result)
    assert "the NumPy module's expectation over all 8 keep patterns, against full BPTT:" in result.stdout
    assert "against the NumPy module, torch's draws (seed 0) replayed into it:" in result.stdout
    (rows,) = sections(result.stdout).values()
    assert_rows(rows, ("U", "W", "V", "b", "c", "h0"), ("loss", "outputs"))


def test_a_gradient_one_part_in_a_billion_off_fails_against_numpy(runs):
    """Planted in copies of generated/linear_torch.py and linear_jax.py: finite differences cannot see it
    (1e-7), the comparison with the NumPy module does (1e-12); the NumPy module passes; exit 1."""
    result = runs["planted"]
    assert result.returncode == 1, result.stdout + result.stderr
    found = sections(result.stdout)
    numpy_rows, *framework_rows = found.values()
    assert_rows(numpy_rows, LINEAR)
    assert len(framework_rows) == 2, result.stdout
    for rows in framework_rows:
        finite_differences, against_numpy = rows["W_hh"]
        assert " ok (tolerance 1e-07)" in finite_differences
        assert "FAIL (tolerance 1e-12)" in against_numpy
        assert rows["FAILED:"] == ["FAILED: W_hh"]
        assert_rows({k: v for k, v in rows.items() if k != "W_hh"}, ("W_hx", "W_qh", "h0"), ("loss", "outputs"))


@pytest.mark.parametrize("backend", ["jax", "all"])
def test_a_missing_framework_is_one_line_naming_its_extra(tmp_path, backend):
    framework = "jax" if backend == "jax" else "torch"
    (tmp_path / framework).mkdir()
    (tmp_path / framework / "__init__.py").write_text(HIDE.format(framework), encoding="utf-8")
    result = bptt("check", "linear", "--backend", backend, *SMALL, env=pythonpath(tmp_path))
    assert_error(result, 2, f"the {framework} backend needs {framework}", f"pip install 'bptt[{framework}]'")
    assert result.stdout == ""
