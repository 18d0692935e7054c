"""Exit status: 0 all passed, 1 a check failed, 2 a usage error, 3 an OS or internal error, 4 a non-finite
forward pass in `bptt check`; every error is one line on stderr, never a traceback."""

import errno
import os

import pytest

from bptt.app import cli, files
from bptt.tests.support.cli import assert_error, assert_ok, cached, run_all

UNWRITABLE = "/sys/kernel/bptt-test.tex"  # sysfs refuses new files, even to root


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    empty = tmp_path_factory.mktemp("empty")
    cases = {
        1: ("codegen", "--check", "linear", "--out", empty),
        2: ("check", "elman", "--steps", "0"),
        3: ("latex", "linear", "-o", UNWRITABLE),
        4: ("check", "linear", "--steps", "2000", "--dtype", "float32"),
    }
    results = run_all(list(cases.values()))
    return {status: results[args] for status, args in cases.items()} | {"empty": empty}


def test_0_when_the_work_is_done():
    assert_ok(cached("models"))


def test_1_when_a_check_fails(outcomes):
    """codegen --check with a missing module: a failed check, not an error (stdout names it, stderr is empty)."""
    result = outcomes[1]
    assert result.returncode == 1
    assert result.stdout.startswith(f"missing: {outcomes['empty'] / 'linear.py'}\n")
    assert result.stderr == ""


def test_2_for_a_usage_error_in_one_line(outcomes):
    """An argparse error is one line (no usage block), from the subcommand's parser."""
    assert_error(outcomes[2], 2, "bptt check: error: argument --steps: expected a positive integer, got '0'")
    assert "usage:" not in outcomes[2].stderr


def test_3_for_an_os_error_naming_the_path(outcomes):
    """A file the system refuses to create is an OS error (3), not a failed check (1) nor a usage error (2)."""
    assert_error(outcomes[3], 3, f"bptt latex: error: {UNWRITABLE}: ")
    assert ".tmp" not in outcomes[3].stderr
    assert not os.path.exists(UNWRITABLE)


def test_4_for_a_forward_pass_that_overflows(outcomes):
    """linear in float32 over 2000 steps overflows: one line saying where, exit 4, no table of nan."""
    assert_error(outcomes[4], 4, "bptt check: error: ", "float32", "not finite")
    assert "nan" not in outcomes[4].stdout


# ---------------------------------------------------------------- in-process: errors no file system can produce


def test_a_permission_error_names_the_users_path_not_the_temporary_file(tmp_path, monkeypatch, capsys):
    def refused(dir, prefix, suffix):
        raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, f"{prefix}x1y2{suffix}"))

    monkeypatch.setattr(files.tempfile, "mkstemp", refused)
    assert cli.main(["latex", "linear", "-o", str(tmp_path / "out.tex")]) == 3
    err = capsys.readouterr().err
    assert err == f"bptt latex: error: {tmp_path / 'out.tex'}: Permission denied\n"
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, capsys):
    """The disk fills up at the rename: exit 3, the old file is whole, the temporary is gone."""
    path = tmp_path / "out.tex"
    path.write_text("old", encoding="utf-8")

    def disk_full(source, target):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), source)

    monkeypatch.setattr(files.os, "replace", disk_full)
    assert cli.main(["latex", "linear", "-o", str(path)]) == 3
    assert capsys.readouterr().err == f"bptt latex: error: {path}: {os.strerror(errno.ENOSPC)}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.tex"]
    assert path.read_text(encoding="utf-8") == "old"


def test_out_of_memory_is_an_internal_error(monkeypatch, capsys):
    """MemoryError exits 3 in one line (BPTT_DEBUG=1 lets it through with its traceback)."""

    def exhausted(*arguments):
        raise MemoryError

    monkeypatch.setattr(cli, "sections", exhausted)
    monkeypatch.delenv("BPTT_DEBUG", raising=False)
    assert cli.main(["latex", "linear"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("bptt latex: error: out of memory: ")
    assert len(captured.err.splitlines()) == 1
    monkeypatch.setenv("BPTT_DEBUG", "1")
    with pytest.raises(MemoryError):
        cli.main(["latex", "linear"])


@pytest.mark.parametrize("command", ["", "models", "latex", "codegen", "check"])
def test_help_lists_the_exit_statuses(command, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--help"] if command else ["--help"])
    assert exited.value.code == 0
    epilog = capsys.readouterr().out.split("exit status:\n")[1]
    assert [line.split()[0] for line in epilog.splitlines()] == ["0", "1", "2", "3", "4", "130"]
