"""The README shows real tool output, and its test command is the one CI runs."""

import pathlib
import re

import pytest

from bptt.tests.support.printed import GROUP, shown_document

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
XDIST_GROUP = GROUP  # the documents of shown_document() are built once for the modules that read them
EXCERPT = re.compile(r"<!-- begin excerpt: (.+?) -->\n(.*?)<!-- end excerpt -->", re.S)


def source_text(source):
    """What the tool produces for an excerpt's source."""
    latex = re.fullmatch(r"bptt latex (\S+) --format md", source)
    if latex:
        return shown_document(latex.group(1), "md")
    if source.startswith("generated/"):
        return (ROOT / source).read_text(encoding="utf-8")
    raise AssertionError(f"README excerpt has an unknown source {source!r}")


def excerpts():
    found = EXCERPT.findall(README)
    assert found, "the README has no excerpts"
    return found


@pytest.mark.parametrize("source, text", excerpts())
def test_excerpt_is_tool_output(source, text):
    body = re.sub(r"^```\w*\n|```\n?$", "", text.strip() + "\n", flags=re.M).strip("\n")
    assert body in source_text(source), f"README excerpt from {source} differs from the tool's output"


def test_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert f"```\n{ci}\n```" in README, f"the README's test command should be .ci/run's: {ci}"
