"""The README's gradient-flow section: the plots in docs/gradient-flow/<model> are the tool's (`bptt analyze MODEL
-o docs/gradient-flow/MODEL` regenerates them) and their data, the CSV beside each, is checked against a fresh
analysis; its excerpts of `bptt analyze` are the command's output, and the numbers its sentences quote are measured."""

import csv
import io
import math
import pathlib
import re
import shlex
import struct
from dataclasses import replace

import pytest

from bptt.app import cli
from bptt.app.analysis import plots
from bptt.app.analysis.analyze import analyze
from bptt.derive.models import load

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "gradient-flow"
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = README[README.index("## Gradient flow") : README.index("## The generated modules")]
EXCERPT = re.compile(r"<!-- begin analyze: (.+?) -->\n```\n(.*?)```\n<!-- end analyze -->", re.S)
MODELS = ("elman", "linear", "lstm")


def rows(text):
    return list(csv.reader(io.StringIO(text)))


@pytest.mark.parametrize("name", MODELS)
def test_checked_in_plots_are_current(name):
    folder = FOLDER / name
    fresh = analyze(load(name))  # the command's defaults
    stale = f"docs/gradient-flow/{name} is stale: run `bptt analyze {name} -o docs/gradient-flow/{name}`"
    expected = {f"{t.name}{suffix}" for t in fresh.tables for suffix in (".png", ".csv")}
    assert {path.name for path in folder.iterdir()} == expected, stale
    for table in fresh.tables:
        old, new = rows((folder / f"{table.name}.csv").read_text(encoding="utf-8")), rows(table.csv())
        assert old[0] == new[0] and len(old) == len(new), stale
        for before, after in zip(old[1:], new[1:], strict=True):
            for a, b in zip(before, after, strict=True):
                assert a == b or float(a) == pytest.approx(float(b), rel=1e-9), f"{stale} ({table.name}: {a} != {b})"
        image = (folder / f"{table.name}.png").read_bytes()
        figure = plots.figures(replace(fresh, tables=(table,)))[table.name]
        size = tuple(round(v) for v in figure.get_size_inches() * figure.dpi)
        assert image[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", image[16:24]) == size


def test_only_the_documented_models_have_plots():
    assert sorted(path.name for path in FOLDER.iterdir()) == sorted(MODELS)
    for name in MODELS:
        assert f"docs/gradient-flow/{name}/" in SECTION or name == "linear"


@pytest.mark.parametrize("command, text", EXCERPT.findall(SECTION), ids=[c for c, _ in EXCERPT.findall(SECTION)])
def test_excerpt_is_the_commands_output(command, text, capsys):
    """Every line of an excerpt is a line that the command prints."""
    argv = shlex.split(command)
    assert argv[0] == "bptt"
    assert cli.main(argv[1:]) == 0
    printed = capsys.readouterr().out.splitlines()
    missing = [line for line in text.splitlines() if line not in printed]
    assert text.strip() and not missing, f"not printed by `{command}`: {missing}"


def last_row(table, **where):
    """The row of the largest T - t among those matching `where`, as {column: value}."""
    found = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    found = [row for row in found if all(row[k] == v for k, v in where.items())]
    return max(found, key=lambda row: row["T-t"])


def test_the_sections_numbers_are_measured():
    """The vanishing and exploding the section describes, in the numbers it quotes."""
    linear = analyze(load("linear"), 6, 0, (0.5, 1.5))
    sigma = float(linear.table("gradient_norms").rows[-6][4])  # the upper bound at T - t = 1, radius 1.5: sigma_max
    assert f"`σ_max(W_hh)` ({sigma:.3g} at radius 1.5)" in SECTION

    free, saturated = (analyze(load("elman"), radii=(0.5, 1.5), scale=scale) for scale in (None, 1))
    norms, flat = free.table("gradient_norms"), saturated.table("gradient_norms")
    small, large = last_row(norms, radius=0.5), last_row(norms, radius=1.5)
    assert small["|dh_T/dh_t|"] < 1e-9 and large["|dh_T/dh_t|"] > 1e6  # vanishes at 0.5, explodes at 1.5
    assert small["|dL_T/dh_t|"] < 1e-9 and large["|dL_T/dh_t|"] > 1e6
    assert all(last_row(flat, radius=r)["|dh_T/dh_t|"] < 1e-3 for r in (0.5, 1.5))  # saturated: vanishes at both
    bound, saturated_product = large["upper_bound"], last_row(flat, radius=1.5)["|dh_T/dh_t|"]
    quoted = f"reaches {bound:.2g} where the product\nit bounds is {large['|dh_T/dh_t|']:.2g} (unsaturated) or "
    assert quoted + f"{saturated_product:.2g} (saturated)" in SECTION

    lstm = analyze(load("lstm"), radii=(0.5, 1.5))
    norms = lstm.table("gradient_norms")
    assert last_row(norms, radius=0.5)["|dL_T/d(c_t,h_t)|"] < 1e-3 and last_row(norms, radius=1.5)["|dc_T/dc_t|"] > 1
    carousel = lstm.table("carousel")
    held, halved = last_row(carousel, gate_bias=5.0)["prod f_k"], last_row(carousel, gate_bias=0.0)["prod f_k"]
    assert 0.7 < held < 0.8  # "three quarters"
    assert f"`f ≈ σ(5) ≈ {1 / (1 + math.exp(-5)):.3f}`" in SECTION and f"keeps {halved:.0e}" in SECTION
