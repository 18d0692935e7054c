"""A normal (non-editable) install: one top-level package, `bptt`, and a CLI that never writes into it."""

import importlib.metadata
import shutil
import subprocess
import sys

import pytest

from bptt.tests.support.cli import REPO, ZOO, assert_ok, assert_user_error, bptt, cached, pythonpath

# Left out of the copy that is built: the repository's history, caches and earlier builds.
NOT_SOURCE = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", ".*_cache", ".benchmarks", ".venv")


def setuptools_builds_this():
    """Whether the installed setuptools reads pyproject.toml (SPDX licence: setuptools >= 77) without isolation."""
    major = importlib.metadata.version("setuptools").split(".")[0]
    return major.isdigit() and int(major) >= 77


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`pip install . --no-deps --target DIR` of a copy of the repository (the checkout itself stays untouched)."""
    root = tmp_path_factory.mktemp("install")
    source, target = root / "source", root / "target"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    isolation = ["--no-build-isolation"] if setuptools_builds_this() else []
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *isolation, "--target", target, source],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target


def files(folder):
    """Every file under folder but bytecode caches, as paths relative to it."""
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_only_bptt_is_installed_at_the_top_level(installed):
    top = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin"}
    assert top == {"bptt"}
    package = installed / "bptt"
    assert {"derive", "documents", "codegen", "app", "generated", "__main__.py"} <= {p.name for p in package.iterdir()}
    for backend in ("numpy", "torch", "jax"):
        assert (package / "codegen" / backend / "module.py.j2").is_file(), f"the {backend} template is not installed"
    assert any(package.glob("documents/templates/*.j2")), "the document templates are not installed"
    folders = {init.parent.relative_to(REPO) for init in REPO.rglob("__init__.py")}  # pyproject.toml lists each
    folders = {f for f in folders if not f.parts or not (f.parts[0] in ("tests", "build") or f.parts[0].startswith("."))}
    assert sorted(str(f) for f in folders if not (package / f / "__init__.py").is_file()) == []


def test_the_installed_cli_runs_from_elsewhere(installed, tmp_path):
    """`python -m bptt models` and the installed `bptt` script both use the installed package and agree."""
    env = pythonpath(installed)
    where = subprocess.run(
        [sys.executable, "-c", "import bptt; print(bptt.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.strip() == str(installed / "bptt" / "__init__.py")
    by_module = bptt("models", cwd=tmp_path, env=env)
    assert_ok(by_module)
    assert by_module.stdout == cached("models").stdout
    script = subprocess.run(
        [installed / "bin" / "bptt", "models"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert_ok(script)
    assert script.stdout == by_module.stdout


def test_installed_codegen_never_writes_into_the_install(installed, user_file, tmp_path):
    """A user's module lands in the current folder; the zoo is regenerated only with --out; --check reads the
    installed modules; nothing under the install changes."""
    env = pythonpath(installed)
    work = tmp_path / "work"
    work.mkdir()
    before = {path: (installed / path).read_bytes() for path in files(installed)}

    result = bptt("codegen", f"{user_file}:sigmoid_rnn", cwd=work, env=env)
    assert_ok(result)
    assert result.stdout == "wrote sigmoid_rnn.py\n"
    assert_user_error(bptt("codegen", cwd=work, env=env), "--out")
    assert_ok(bptt("codegen", "--check", cwd=work, env=env))
    assert_ok(bptt("codegen", "--out", ".", cwd=work, env=env))

    expected = {"sigmoid_rnn.py", *(name.replace("-", "_") + ".py" for name in ZOO)}
    assert {p.name for p in work.iterdir()} == expected
    assert {path: (installed / path).read_bytes() for path in files(installed)} == before
    assert not any(path.suffix == ".tmp" for path in files(installed)), "a temporary file was left in the install"
