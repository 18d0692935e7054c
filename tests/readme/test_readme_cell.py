"""The README's own-cell guide works as written: its GRU derives, generates and checks through
the CLI, and `bptt codegen` never replaces the model file it reads."""

import pathlib
import re

from bptt.tests.support.cli import assert_all_rows_ok, assert_ok, assert_user_error, bptt

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def guide_cell():
    """The first Python block of the README's own-cell section."""
    section = README[README.index("## Write your own cell") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_gru_derives_generates_and_checks(tmp_path):
    (tmp_path / "cells.py").write_text(guide_cell(), encoding="utf-8")
    assert_ok(bptt("latex", "cells.py:my_gru", "-o", "my_gru.tex", cwd=tmp_path))
    assert (tmp_path / "my_gru.tex").read_text(encoding="utf-8").startswith("\\documentclass")
    assert_ok(bptt("codegen", "cells.py:my_gru", cwd=tmp_path))
    assert "bptt codegen cells.py:my_gru" in (tmp_path / "my_gru.py").read_text(encoding="utf-8")
    result = bptt("check", "cells.py:my_gru", "--steps", "20", cwd=tmp_path)
    assert_ok(result)
    assert_all_rows_ok(result.stdout, ["W_r", "U_r", "b_r", "W_z", "U_n", "V", "h0"])


def test_codegen_refuses_to_replace_the_model_file_it_reads(tmp_path):
    source = guide_cell()
    (tmp_path / "my_gru.py").write_text(source, encoding="utf-8")
    result = bptt("codegen", "my_gru.py:my_gru", cwd=tmp_path)
    assert_user_error(result, "would replace the model file itself")
    assert (tmp_path / "my_gru.py").read_text(encoding="utf-8") == source
