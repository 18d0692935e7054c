"""The plots in docs/gradient-flow are the tool's: `bptt analyze linear -o docs/gradient-flow` regenerates them,
and their data (the CSV beside each) is checked against a fresh analysis here, as the README's excerpts are."""

import csv
import io
import pathlib
import struct

import pytest

from bptt.app.analyze import analyze
from bptt.derive.models import load

FOLDER = pathlib.Path(__file__).resolve().parents[2] / "docs" / "gradient-flow"
COMMAND = "bptt analyze linear -o docs/gradient-flow"


def rows(text):
    return list(csv.reader(io.StringIO(text)))


def test_checked_in_plots_are_current():
    fresh = analyze(load("linear"))  # the command's defaults
    stale = f"docs/gradient-flow is stale: run `{COMMAND}`"
    expected = {f"{t.name}{suffix}" for t in fresh.tables for suffix in (".png", ".csv")}
    assert {path.name for path in FOLDER.iterdir()} == expected, stale
    for table in fresh.tables:
        old, new = rows((FOLDER / f"{table.name}.csv").read_text(encoding="utf-8")), rows(table.csv())
        assert old[0] == new[0] and len(old) == len(new), stale
        for before, after in zip(old[1:], new[1:], strict=True):
            for a, b in zip(before, after, strict=True):
                assert a == b or float(a) == pytest.approx(float(b), rel=1e-9), f"{stale} ({table.name}: {a} != {b})"
        image = (FOLDER / f"{table.name}.png").read_bytes()
        assert image[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", image[16:24]) == (640, 480)
