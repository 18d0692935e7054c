"""`analyze -o DIR` and `codegen --out DIR` make DIR when its parent exists, as mkdir would, once there is
something to write; a missing parent, or something at DIR that is not a folder, is one line and exit 2."""

import pytest

from bptt.app import cli
from bptt.codegen.backends import BACKENDS
from bptt.derive.models import load


def run(capsys, *argv):
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(result, *fragments):
    code, out, err = result
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert all(fragment in err for fragment in fragments), err


def test_analyze_makes_its_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "analyze", "linear", "--steps", "2", "--radius", "1", "-o", "plots")
    assert code == 0, err
    names = ("gradient_norms", "eigenvalues", "alignment", "clipping")
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(
        f"{n}{s}" for n in names for s in (".csv", ".png")
    )
    assert err.splitlines()[0] == "wrote plots/gradient_norms.png"


def test_analyze_makes_nothing_when_it_measures_nothing(capsys, tmp_path):
    """jordan has no flow to measure: a usage error, and no empty folder left behind."""
    assert_refused(run(capsys, "analyze", "jordan", "-o", tmp_path / "plots"), "teacher forcing")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [("analyze", "linear", "-o"), ("codegen", "linear", "--out")])
def test_a_missing_parent_is_refused(capsys, tmp_path, command):
    target = tmp_path / "no" / "such"
    option = command[-1]
    says = f"{option}: output folder {str(target)!r} does not exist, nor does its parent {str(target.parent)!r}"
    assert_refused(run(capsys, *command, target), says)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [("analyze", "linear", "-o"), ("codegen", "linear", "--out")])
@pytest.mark.parametrize("blocker", ["file", "dangling symlink"])
def test_something_else_at_the_folders_name_is_refused(capsys, tmp_path, command, blocker):
    target = tmp_path / "out"
    if blocker == "file":
        target.write_text("kept", encoding="utf-8")
    else:
        target.symlink_to(tmp_path / "nowhere")
    assert_refused(run(capsys, *command, target), f"{command[-1]}: {str(target)!r} is not a folder")
    assert target.is_symlink() or target.read_text(encoding="utf-8") == "kept"


def test_codegen_makes_its_folder_and_check_makes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "codegen", "--check", "linear", "--out", "modules")
    assert (code, out.splitlines()[0]) == (1, "missing: modules/linear.py") and list(tmp_path.iterdir()) == []
    code, out, err = run(capsys, "codegen", "linear", "--out", "modules")
    assert (code, out, err) == (0, "wrote modules/linear.py\n", "")
    assert (tmp_path / "modules" / "linear.py").read_text(encoding="utf-8") == BACKENDS["numpy"].module_source(
        load("linear")
    )
    assert run(capsys, "codegen", "--check", "linear", "--out", "modules")[0] == 0
