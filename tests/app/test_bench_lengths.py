"""`bptt bench MODEL --lengths 5,3,1|T|random`: loss_and_grads with lengths= against the same call without, in one
run, the padded call checked against each sequence run alone before it is timed; the ratio reported, never asserted.
Bad --lengths, and --lengths with --peers or --checkpoints, exit 2 in one line."""

import re
import sys

import numpy as np
import pytest

from bptt.app.bench import lengths as padded
from bptt.app.bench import readme_table
from bptt.app.bench.measuring import TOLERANCE
from bptt.runtime.options import Lengths
from bptt.tests.app.test_check_lengths import Unpadded  # a module that drops lengths=
from bptt.tests.support.cli import assert_user_error, bptt
from bptt.tests.support.modules import module_of

TINY = ("--sizes", "d=2,h=3,q=4", "--repeats", "1")
RATIO = re.compile(r"^lengths= / no lengths: (\d+\.\d\d) \(B=(\d+), lengths (\d+)\.\.(\d+) ", re.MULTILINE)


def rows_of(stdout):
    return [line.split() for line in stdout.splitlines() if line.startswith(("generated ", "no lengths "))]


@pytest.mark.parametrize("lengths", ["5,3,1", "random"])
def test_bench_with_mixed_lengths_reports_the_ratio(lengths):
    batch = "3" if lengths == "5,3,1" else "4"  # given lengths are the batch: --batch given too is their count
    result = bptt("bench", "elman", "--lengths", lengths, "--steps", "6", "--batch", batch, *TINY)
    assert result.returncode == 0, result.stdout + result.stderr
    ratios = RATIO.findall(result.stdout)
    assert len(ratios) == 2 and all(float(ratio) > 0 for ratio, *_ in ratios), result.stdout  # float64, float32
    assert all(b == batch and 1 <= int(low) <= int(high) <= 6 for _, b, low, high in ratios), ratios
    assert f"elman float64, lengths={lengths}: T=6 B={batch} " in result.stdout
    generated = [row for row in rows_of(result.stdout) if row[0] == "generated"]
    assert [row[2] for row in generated] == ["1.00", "1.00"]
    assert all(float(row[-1]) <= TOLERANCE["float32"] for row in generated)  # checked against each sequence alone
    assert result.stdout.count("its loss counts the padded steps too): not compared") == 2


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_bench_with_every_length_t_compares_both_calls(backend):
    """--lengths T: nothing is padded, so the call without lengths= has the same loss and is checked too."""
    pytest.importorskip(backend)
    result = bptt("bench", "lstm", "--lengths", "T", "--backend", backend, "--steps", "3", "--batch", "2",
                  "--dtype", "float64", *TINY)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert [row[0] for row in rows_of(result.stdout)] == ["generated", "no"]
    assert all(float(row[-1]) <= 1e-12 for row in rows_of(result.stdout))
    assert [(b, low, high) for _, b, low, high in RATIO.findall(result.stdout)] == [("2", "3", "3")]


def test_a_module_that_ignores_lengths_is_caught_and_not_timed():
    module = module_of("elman")
    sizes = {"d": 2, "h": 3, "q": 4}
    rows, drawn = padded.run(module, sizes, 5, 3, np.float64, Lengths((5, 3, 1)), repeats=1)
    assert list(drawn) == [5, 3, 1] and rows[0].error <= 1e-12 and rows[1].ratio > 0
    rows, _ = padded.run(Unpadded(module), sizes, 5, 3, np.float64, Lengths((5, 3, 1)), repeats=1, numpy_module=module)
    assert rows[0].note.startswith("gradients differ") and rows[0].ratio != rows[0].ratio
    assert "not timed" in padded.summary(rows, drawn)


def test_alone_joins_initial_state_gradients_by_sequence():
    """The reference: the loss and parameter gradients the mean of the sequences' own, h0's gradient their rows."""
    module = module_of("elman")
    problem, _ = padded.random_problem(module, {"d": 2, "h": 3, "q": 4}, 4, 2, np.float64)
    params, xs, ys, _ = problem
    loss, grads = padded.alone(module, problem, [4, 2])
    first = module.loss_and_grads(params, xs[:, :1], ys[:, :1])
    second = module.loss_and_grads(params, xs[:2, 1:], ys[:2, 1:])
    assert loss == pytest.approx((first[0] + second[0]) / 2)
    assert np.allclose(grads["W"], (first[1]["W"] + second[1]["W"]) / 2)
    assert np.allclose(grads["h0"], np.concatenate([first[1]["h0"], second[1]["h0"]]) / 2)


def test_lengths_t_parses_and_draws_every_length_t():
    lengths = Lengths.parse(" T ")
    assert lengths.full and not lengths.random and lengths.text() == "T" and Lengths.parse(lengths.text()) == lengths
    assert lengths.draw(np.random.default_rng(0), 7, 3) == [7, 7, 7] and lengths.batch(3) == 3
    assert Lengths.parse("5,3,1").batch(8) == 3 and Lengths.parse("random").batch(8) == 8
    assert Lengths.parse("5,3,1").above(4) == "--lengths 5,3,1: a length is above T=4; give --steps 5"
    assert Lengths.parse("5,3,1").above(5) is None and lengths.above(1) is None


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--lengths", "0,3"), "expected --lengths as integers from 1 to 999999999"),
        (("--lengths", "t"), "expected --lengths as integers from 1 to 999999999"),
        (("--lengths", "2.5"), "expected --lengths as integers from 1 to 999999999"),
        (("--lengths", "6,3,1", "--steps", "5"), "a length is above T=5; give --steps 6"),
        (("--lengths", "5,3", "--batch", "3"), "give --batch 2 or leave it out"),
        (("--lengths", "T", "--peers", "naive"), "no --peers, no --checkpoints"),
        (("--lengths", "T", "--checkpoints", "3"), "no --peers, no --checkpoints"),
    ],
)
def test_bench_refuses_bad_lengths_with_exit_2(args, fragment):
    assert_user_error(bptt("bench", "elman", *args), fragment)


def test_check_takes_lengths_t():
    result = bptt("check", "elman", "--lengths", "T", "--batch", "2", "--steps", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "lengths=T" in result.stdout and "FAIL" not in result.stdout


def test_the_readme_s_lengths_table_has_a_row_per_model_backend_and_dtype(monkeypatch, capsys):
    pytest.importorskip("torch")
    monkeypatch.setattr(readme_table, "LENGTHS_CONFIGS", [("elman", 3, 2, {"d": 2, "h": 3, "q": 4})])
    readme_table.lengths_table(repeats=1)
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| elman")]
    assert [row[1:3] for row in rows] == [["numpy", "float64"], ["numpy", "float32"], ["torch", "float64"],
                                          ["torch", "float32"]]  # fmt: skip
    assert all(float(cell.strip(" |")) > 0 for row in rows for cell in row[3:]), rows


def test_readme_table_refuses_an_unknown_table(monkeypatch, capsys):
    """`python -m bptt.app.bench.readme_table --tables lengths,speeds`: its parser's error, exit 2 (in this process:
    main reads sys.argv, and refuses before it measures or starts a process)."""
    monkeypatch.setattr(sys, "argv", ["readme_table", "--tables", "lengths,speeds"])
    with pytest.raises(SystemExit) as stopped:
        readme_table.main()
    assert stopped.value.code == 2 and "--tables: expected some of speed,backends,lengths" in capsys.readouterr().err
