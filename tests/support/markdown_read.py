"""Markdown documents read as a reader's tools read them: maths by KaTeX, the rest by CommonMark's reference
parser (commonmark.js), in one Node.js process (tests/documents/markdown_reader.js); and the maths of a
Markdown document, found as GitHub finds it."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

FOLDER = pathlib.Path(__file__).resolve().parents[1] / "documents"
READER = FOLDER / "markdown_reader.js"
# The Node.js packages, pinned in package.json (and package-lock.json) there; .ci/run installs them in NODE_PREFIX.
PACKAGES = json.loads((FOLDER / "package.json").read_text())["dependencies"]
NODE_PREFIX = pathlib.Path(os.environ.get("BPTT_NODE_PREFIX") or pathlib.Path.home() / ".cache/bptt/node")


def reader():
    """read(formulas, documents) -> (KaTeX's MathML or error per formula, CommonMark's reading per document:
    its headings and paragraphs as text, its images' destinations). Skips, saying what it needs, without
    Node.js or the pinned packages."""
    node = shutil.which("node")
    modules = NODE_PREFIX / "node_modules"
    if node is None or {name: _installed(modules / name) for name in PACKAGES} != PACKAGES:
        pins = " ".join(f"{name}@{version}" for name, version in PACKAGES.items())
        pytest.skip(
            f"needs Node.js and {pins} in {modules} (npm install --prefix {NODE_PREFIX} {pins}; .ci/run installs them)"
        )

    def read(formulas, documents):
        result = subprocess.run(
            [node, str(READER)],
            input=json.dumps({"formulas": formulas, "documents": documents}),
            capture_output=True,
            text=True,
            env={**os.environ, "NODE_PATH": str(modules)},
            timeout=300,
            check=True,
        )
        out = json.loads(result.stdout)
        return out["formulas"], out["documents"]

    return read


def _installed(package):
    """The version of the Node.js package in a folder, or None."""
    manifest = package / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.is_file() else None


def display_maths(text):
    """The contents of the $$ blocks of a Markdown document."""
    return re.findall(r"^\$\$\n(.*?)\n\$\$$", text, re.M | re.S)


def inline_maths(text):
    """The inline $...$ of a Markdown document, outside $$ blocks and code spans, as GitHub reads them: a
    dollar escaped by a backslash is a dollar."""
    outside = re.sub(r"^\$\$\n.*?\n\$\$$", "", text, flags=re.M | re.S)
    outside = re.sub(r"(`+).*?\1", "", outside)
    return re.findall(r"(?<![\\$])\$(?!\$)(.+?)(?<!\\)\$", outside)


def errors(formulas, read):
    """(formula, KaTeX's error) for each formula of the list KaTeX refuses, as read() returned them."""
    return [(formula, r["error"]) for formula, r in zip(formulas, read, strict=True) if "error" in r]


def subscripted(mathml):
    """(base, subscript) of every subscript in KaTeX's MathML, each as its text."""
    found = []
    for element in ET.fromstring(re.search(r"<math.*</math>", mathml, re.S)[0]).iter():
        if element.tag.rpartition("}")[2] in ("msub", "msubsup"):
            base, sub = ("".join(child.itertext()) for child in list(element)[:2])
            found.append((base, sub))
    return found
