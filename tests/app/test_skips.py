"""Without a framework its backend's tests skip, each with its reason; under --fail-on-skip (CI) a skip fails."""

import pathlib

import pytest

pytest_plugins = ["pytester"]
CONFTEST = (pathlib.Path(__file__).parents[1] / "conftest.py").read_text(encoding="utf-8")
MODULE = """
import pytest

pytest.importorskip("no_such_framework", reason="needs no_such_framework (pip install 'bptt[none]')")


def test_uses_it():
    assert False
"""
SKIPPED_TEST = """
import pytest


def test_skipped():
    pytest.skip("not here")
"""


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_backend=MODULE, test_other=SKIPPED_TEST, test_plain="def test_plain():\n    pass\n")
    return pytester


def test_a_missing_framework_skips_with_its_reason(suite):
    result = suite.runpytest("-p", "no:xdist", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    assert "SKIPPED [1] test_backend.py:3: needs no_such_framework (pip install 'bptt[none]')" in result.stdout.str()


def test_fail_on_skip_turns_every_skip_into_a_failure(suite):
    result = suite.runpytest("-p", "no:xdist", "-p", "no:cacheprovider", "--fail-on-skip")
    result.assert_outcomes(errors=1)  # the module's skip is a collection error, which stops the run
    assert "skipped under --fail-on-skip: Skipped: needs no_such_framework" in result.stdout.str()
    assert result.ret != 0


def test_fail_on_skip_fails_a_test_that_skips(suite):
    result = suite.runpytest(
        "-p", "no:xdist", "-p", "no:cacheprovider", "--fail-on-skip", "test_other.py", "test_plain.py"
    )
    result.assert_outcomes(passed=1, failed=1)
    assert "skipped under --fail-on-skip" in result.stdout.str()
