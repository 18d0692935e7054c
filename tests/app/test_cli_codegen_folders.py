"""`bptt codegen`: where modules go by default, and what `--check` reports about the output folder."""

import pytest

from bptt.tests.support.cli import GENERATED, assert_ok, assert_user_error, bptt, pythonpath, shadow_package


def snapshot(folder):
    """{name: (bytes, mtime)} of the *.py files in folder: proof that nothing was written there."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.glob("*.py")}


@pytest.fixture(scope="module")
def zoo_out(tmp_path_factory):
    """A folder with every zoo module, fresh from `codegen --out`: copy what a test needs from it."""
    out = tmp_path_factory.mktemp("zoo")
    assert_ok(bptt("codegen", "--out", out))
    return out


def fresh_copy(zoo_out, folder):
    folder.mkdir()
    for path in zoo_out.glob("*.py"):
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


def test_check_names_missing_stale_and_unexpected_modules(zoo_out, tmp_path):
    """Checking the whole zoo: a deleted module is missing, an edited one stale, a stray *.py unexpected (exit 1);
    the hint repeats --out as typed; __init__.py and files that are not *.py are not named."""
    out = fresh_copy(zoo_out, tmp_path / "out")
    (out / "linear.py").unlink()
    (out / "elman.py").write_text("# edited\n", encoding="utf-8")
    for name in ("old_model.py", "__init__.py", "notes.txt"):
        (out / name).write_text("", encoding="utf-8")
    before = snapshot(out)

    result = bptt("codegen", "--check", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "stale: out/elman.py",
        "missing: out/linear.py",
        "run `bptt codegen --out out` to regenerate",
        "unexpected: out/old_model.py (no zoo model writes it: delete it, or move it out of this folder)",
    ]
    assert result.stderr == ""
    assert snapshot(out) == before


def test_check_of_named_models_ignores_other_files(zoo_out, tmp_path):
    """With MODELs given, only their modules are checked: other modules in the folder are not unexpected."""
    out = fresh_copy(zoo_out, tmp_path / "out")
    (out / "old_model.py").write_text("", encoding="utf-8")
    assert_ok(bptt("codegen", "--check", "jordan", "linear", "--out", out))
    (out / "linear.py").write_text("# edited\n", encoding="utf-8")
    result = bptt("codegen", "--check", "jordan", "linear", "--out", out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"stale: {out}/linear.py",
        f"run `bptt codegen jordan linear --out {out}` to regenerate",
    ]


def test_check_with_only_an_unexpected_module_fails_without_a_regenerate_hint(zoo_out, tmp_path):
    """Regenerating would not remove a stray module, so the only advice is on its own line."""
    out = fresh_copy(zoo_out, tmp_path / "out")
    assert_ok(bptt("codegen", "--check", "--out", out))
    (out / "stray.py").write_text("", encoding="utf-8")
    result = bptt("codegen", "--check", "--out", out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert [line.split(" (")[0] for line in result.stdout.splitlines()] == [f"unexpected: {out}/stray.py"]


def test_a_users_module_goes_to_the_current_folder(user_file, tmp_path):
    """Without --out, a user's model is written to the current folder, even one named like a zoo model;
    the checkout's generated/ is not touched."""
    work = tmp_path / "work"
    work.mkdir()
    before = snapshot(GENERATED)
    for function, name in (("sigmoid_rnn", "sigmoid_rnn.py"), ("named_linear", "linear.py")):
        result = bptt("codegen", f"{user_file}:{function}", cwd=work)
        assert_ok(result)
        assert result.stdout == f"wrote {name}\n"
        assert (work / name).read_text(encoding="utf-8").startswith('"""')
    assert sorted(p.name for p in work.iterdir()) == ["linear.py", "sigmoid_rnn.py"]
    assert snapshot(GENERATED) == before


def test_two_models_writing_one_file_is_a_usage_error(user_file, tmp_path):
    result = bptt("codegen", "linear", f"{user_file}:named_linear", "--out", tmp_path)
    assert_user_error(result, "two models would write", str(tmp_path / "linear.py"))
    assert list(tmp_path.iterdir()) == [user_file]


def test_zoo_modules_go_to_the_checkouts_generated(tmp_path):
    """A bptt whose generated/ has pyproject.toml beside it is a checkout: `codegen linear` rewrites generated/."""
    package = shadow_package(tmp_path / "root")
    (package / "pyproject.toml").write_text("", encoding="utf-8")
    (package / "generated" / "linear.py").write_text("# stale\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    result = bptt("codegen", "linear", cwd=work, env=pythonpath(package.parent))
    assert_ok(result)
    assert result.stdout == f"wrote {package / 'generated' / 'linear.py'}\n"
    assert (package / "generated" / "linear.py").read_bytes() == (GENERATED / "linear.py").read_bytes()
    assert list(work.iterdir()) == []


def test_without_a_checkout_zoo_regeneration_needs_out(tmp_path):
    """Installed without a checkout, `codegen` refuses to write the zoo (exit 2 naming --out) and writes nothing;
    `codegen --check` reads the installed modules: 0 when fresh, 1 naming a stale one (test_install.py writes
    the zoo with --out)."""
    package = shadow_package(tmp_path / "site")
    installed = package / "generated"
    env = pythonpath(package.parent)
    before = snapshot(installed)
    for args in (("codegen",), ("codegen", "linear")):
        result = bptt(*args, cwd=tmp_path, env=env)
        assert_user_error(result, "--out", str(installed))
    assert snapshot(installed) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]

    assert_ok(bptt("codegen", "--check", cwd=tmp_path, env=env))
    (installed / "jordan.py").write_text("# stale\n", encoding="utf-8")
    result = bptt("codegen", "--check", cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == f"stale: {installed / 'jordan.py'}"
