"""Output files: `latex -o` and `codegen` write through symlinks, never replace what is not a regular file,
name the user's path in every error and never leave a file written half-way."""

import os
import stat

import pytest

from bptt.tests.support.cli import assert_ok, assert_user_error, bptt, cached


def listing(folder):
    """{name: (file type, contents or link target)} of everything in folder, hidden files included."""
    found = {}
    for path in folder.iterdir():
        mode = path.lstat().st_mode
        kind = stat.S_IFMT(mode)
        found[path.name] = (
            kind,
            os.readlink(path) if path.is_symlink() else path.read_bytes() if stat.S_ISREG(mode) else None,
        )
    return found


@pytest.fixture(scope="module")
def linear_tex():
    result = cached("latex", "linear")
    assert_ok(result)
    return result.stdout


def test_latex_writes_through_a_chain_of_symlinks(tmp_path, linear_tex):
    """-o link.tex updates the final target of link -> (relative) other/hop.tex -> real.tex; the links stay links,
    and the new file is made in the target's folder (no temporary left anywhere)."""
    links, other = tmp_path / "links", tmp_path / "other"
    links.mkdir()
    other.mkdir()
    (other / "real.tex").write_text("old", encoding="utf-8")
    (other / "hop.tex").symlink_to("real.tex")
    (links / "link.tex").symlink_to("../other/hop.tex")

    result = bptt("latex", "linear", "-o", "link.tex", cwd=links)
    assert_ok(result)
    assert listing(links) == {"link.tex": (stat.S_IFLNK, "../other/hop.tex")}
    assert listing(other) == {
        "hop.tex": (stat.S_IFLNK, "real.tex"),
        "real.tex": (stat.S_IFREG, linear_tex.encode()),
    }


def test_codegen_writes_through_a_symlinked_module(tmp_path):
    """codegen --out DIR, where DIR/linear.py is a symlink: its target gets the module, the link stays."""
    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    store.mkdir()
    (store / "kept.py").write_text("old\n", encoding="utf-8")
    (out / "linear.py").symlink_to(store / "kept.py")
    assert_ok(bptt("codegen", "linear", "--out", out))
    assert (out / "linear.py").is_symlink()
    assert (store / "kept.py").read_text(encoding="utf-8").startswith('"""')
    assert sorted(p.name for p in store.iterdir()) == ["kept.py"]


def test_a_dangling_symlink_gets_its_target_created(tmp_path, linear_tex):
    """-o to a dangling symlink creates its target (as the shell's `>` does) when the target's folder exists."""
    (tmp_path / "link.tex").symlink_to("made.tex")
    assert_ok(bptt("latex", "linear", "-o", tmp_path / "link.tex"))
    assert listing(tmp_path) == {
        "link.tex": (stat.S_IFLNK, "made.tex"),
        "made.tex": (stat.S_IFREG, linear_tex.encode()),
    }


def test_a_dangling_symlink_into_a_missing_folder_is_a_usage_error(tmp_path):
    (tmp_path / "link.tex").symlink_to(tmp_path / "nowhere" / "made.tex")
    result = bptt("latex", "linear", "-o", "link.tex", cwd=tmp_path)
    assert_user_error(result, "link.tex", str(tmp_path / "nowhere"))
    assert listing(tmp_path) == {"link.tex": (stat.S_IFLNK, str(tmp_path / "nowhere" / "made.tex"))}


def test_a_fifo_is_refused_without_blocking(tmp_path):
    """A FIFO is neither opened (which would wait for a reader) nor replaced."""
    fifo = tmp_path / "pipe.tex"
    os.mkfifo(fifo)
    result = bptt("latex", "linear", "-o", "pipe.tex", cwd=tmp_path, timeout=60)
    assert_user_error(result, "bptt latex: error: pipe.tex is a FIFO")
    assert listing(tmp_path) == {"pipe.tex": (stat.S_IFIFO, None)}


@pytest.mark.parametrize("device", ["/dev/full", "/dev/null"])
def test_a_device_is_refused_and_left_alone(device, tmp_path):
    """As root too, -o /dev/full is refused (exit 2) and the device node stays; likewise through a symlink."""
    before = os.lstat(device)
    (tmp_path / "link.tex").symlink_to(device)
    for path in (device, tmp_path / "link.tex"):
        result = bptt("latex", "linear", "-o", path)
        assert_user_error(result, f"{path} is a character device")
    after = os.lstat(device)
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_ino, after.st_rdev, after.st_mode) == (before.st_ino, before.st_rdev, before.st_mode)
    assert listing(tmp_path) == {"link.tex": (stat.S_IFLNK, device)}


def test_a_folder_is_refused_naming_the_path_as_typed(tmp_path):
    """-o somedir: exit 2 naming `somedir`, never a temporary file's name; the folder is left as it was."""
    (tmp_path / "somedir").mkdir()
    (tmp_path / "somedir" / "inside.txt").write_text("kept", encoding="utf-8")
    for typed in ("somedir", "new/"):
        result = bptt("latex", "linear", "-o", typed, cwd=tmp_path)
        assert_user_error(result, f"bptt latex: error: {typed} ")
        assert ".tmp" not in result.stderr
    assert listing(tmp_path / "somedir") == {"inside.txt": (stat.S_IFREG, b"kept")}
    assert [p.name for p in tmp_path.iterdir()] == ["somedir"]


def test_a_symlink_loop_is_a_usage_error(tmp_path):
    (tmp_path / "a.tex").symlink_to("b.tex")
    (tmp_path / "b.tex").symlink_to("a.tex")
    result = bptt("latex", "linear", "-o", "a.tex", cwd=tmp_path)
    assert_user_error(result, "a.tex", "symbolic links")


@pytest.mark.parametrize("blocker", ["folder", "fifo"])
def test_codegen_writes_nothing_when_one_module_path_is_not_a_regular_file(blocker, tmp_path):
    """codegen elman linear --out DIR with DIR/linear.py a folder or FIFO: exit 2 naming it, elman.py not written."""
    blocked = tmp_path / "linear.py"
    blocked.mkdir() if blocker == "folder" else os.mkfifo(blocked)
    result = bptt("codegen", "elman", "linear", "--out", tmp_path, timeout=60)
    assert_user_error(result, str(blocked))
    assert [p.name for p in tmp_path.iterdir()] == ["linear.py"]
    assert stat.S_ISDIR(blocked.lstat().st_mode) if blocker == "folder" else stat.S_ISFIFO(blocked.lstat().st_mode)


def test_an_existing_file_keeps_its_permissions(tmp_path):
    """Replacing a file keeps its mode (here 0o600), as an editor's save does."""
    path = tmp_path / "private.tex"
    path.write_text("old", encoding="utf-8")
    path.chmod(0o600)
    assert_ok(bptt("latex", "linear", "-o", path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text(encoding="utf-8") != "old"
