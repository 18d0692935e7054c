"""Bad inputs found by hand, each kept as a case: the CLI's (one line, exit 2; Ctrl-C exits 130 quietly),
the generated modules' (one ValueError naming the argument, the same in every backend) and the notebook's."""

import pytest

pytest.importorskip("torch", reason="needs torch (pip install 'bptt[torch]')")
pytest.importorskip("jax", reason="needs JAX (pip install 'bptt[jax]')")

import errno
import importlib
import importlib.abc
import os
import signal
import stat
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

from bptt.app import files, notebook, start
from bptt.app.analysis import plots
from bptt.app.analysis.analyze import TABLES
from bptt.app.cli import main
from bptt.derive.models import load
from bptt.tests.support.cli import REPO, clean_env

jax.config.update("jax_enable_x64", True)


def run(capsys, *argv):
    """(exit status, stdout, stderr) of `bptt ARGV`, in process."""
    status = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_usage_error(result, *fragments):
    status, out, err = result
    assert status == 2 and out == "", (status, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("bptt "), err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"


def test_a_size_given_twice_is_refused_naming_it(capsys):
    assert_usage_error(run(capsys, "check", "linear", "--sizes", "d=3,h=4,q=5,d=7"), "d is given twice", "d=3", "d=7")
    status, out, _ = run(capsys, "check", "linear", "--sizes", "d=3,h=4,q=5", "--steps", "2")
    assert status == 0 and "d=3 h=4 q=5" in out  # each once: accepted


@pytest.mark.parametrize(
    "argv",
    [("latex", "elman", "-o", ""), ("analyze", "linear", "-o", ""), ("codegen", "linear", "--out", "")],
    ids=["latex", "analyze", "codegen"],
)
def test_an_empty_output_name_is_refused(capsys, tmp_path, monkeypatch, argv):
    """An empty name is no file (latex printed to stdout) and no folder (codegen wrote into the current one)."""
    monkeypatch.chdir(tmp_path)
    assert_usage_error(run(capsys, *argv), "empty")
    assert list(tmp_path.iterdir()) == []


EXITS = {
    "at import": "import sys\n\nsys.exit(0)\n\ndef make():\n    pass\n",
    "in the function": "import sys\n\ndef make():\n    sys.exit(0)\n",
    "with a message": "def make():\n    raise SystemExit('bye')\n",
}


@pytest.mark.parametrize("where", sorted(EXITS))
def test_a_model_file_that_exits_is_a_usage_error_naming_it(capsys, tmp_path, where):
    path = tmp_path / "quits.py"
    path.write_text(EXITS[where], encoding="utf-8")
    assert_usage_error(run(capsys, "latex", f"{path}:make"), str(path), "called sys.exit(")


def written(folder):
    return {path.name: stat.S_IFMT(path.lstat().st_mode) for path in folder.iterdir()}


def test_analyze_writes_through_symlinks_like_latex(capsys, tmp_path):
    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    store.mkdir()
    (store / "kept.csv").write_text("old", encoding="utf-8")
    (out / "clipping.csv").symlink_to(store / "kept.csv")
    status, _, err = run(capsys, "analyze", "linear", "--steps", "2", "--radius", "1", "-o", out)
    assert status == 0, err
    assert (out / "clipping.csv").is_symlink() and (store / "kept.csv").read_text().startswith("radius,norm")
    expected = {f"{name}{suffix}": stat.S_IFREG for name in TABLES for suffix in (".png", ".csv")}
    assert written(out) == {**expected, "clipping.csv": stat.S_IFLNK} and written(store) == {"kept.csv": stat.S_IFREG}


@pytest.mark.parametrize("blocker", ["fifo", "device", "folder"])
def test_analyze_refuses_what_is_not_a_regular_file_before_measuring(capsys, tmp_path, monkeypatch, blocker):
    """A FIFO, a device (through a symlink) or a folder at one of its output names: exit 2 naming it, nothing
    measured or written, the blocker left as it was."""
    blocked = tmp_path / "eigenvalues.png"
    if blocker == "fifo":
        os.mkfifo(blocked)
    elif blocker == "device":
        blocked.symlink_to("/dev/null")
    else:
        blocked.mkdir()
    before = written(tmp_path)
    measured = []
    monkeypatch.setattr("bptt.app.analysis.analyze.analyze", lambda *args, **kwargs: measured.append(args))
    kind = {"fifo": "a FIFO", "device": "a character device", "folder": "a folder"}[blocker]
    assert_usage_error(run(capsys, "analyze", "linear", "-o", tmp_path), f"{blocked} is {kind}")
    assert measured == [] and written(tmp_path) == before


UNWRITABLE = "/sys/kernel"  # sysfs: a folder that refuses new files and folders, even to root


@pytest.mark.parametrize("folder", [UNWRITABLE, f"{UNWRITABLE}/new"])
def test_analyze_refuses_a_folder_it_cannot_write_before_measuring(capsys, monkeypatch, folder):
    measured = []
    monkeypatch.setattr("bptt.app.analysis.analyze.analyze", lambda *args, **kwargs: measured.append(args))
    status, out, err = run(capsys, "analyze", "linear", "-o", folder)
    assert (status, out) == (3, "") and err.startswith(f"bptt analyze: error: {folder}: ") and err.count("\n") == 1
    assert measured == [] and not os.path.exists(f"{UNWRITABLE}/new")


def test_the_notebook_saves_as_dash_o_writes(tmp_path):
    """save() makes the folder if its parent exists, as -o does; else one line, before anything is written."""
    view = notebook.analyze("linear", steps=2, radii=(1.0,))
    (tmp_path / "file").write_text("", encoding="utf-8")
    for folder, error, says in [
        ("/nonexistent/dir", ValueError, "save: output folder '/nonexistent/dir' does not exist, nor does its parent"),
        (tmp_path / "file", ValueError, f"save: {str(tmp_path / 'file')!r} is not a folder"),
        (f"{UNWRITABLE}/new", OSError, f"{UNWRITABLE}/new"),
    ]:
        with pytest.raises(error) as raised:
            view.save(folder)
        assert says in str(raised.value) and "\n" not in str(raised.value), raised.value
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file"]
    paths = view.save(tmp_path / "made")
    assert sorted(path.name for path in paths) == sorted(path.name for path in (tmp_path / "made").iterdir())
    assert {path.name for path in paths} == {f"{name}{suffix}" for name in TABLES for suffix in (".png", ".csv")}


def test_analyze_names_the_users_file_when_writing_fails(capsys, tmp_path, monkeypatch):
    """An OSError while replacing a file (here: no space left) names the file, not the temporary one beside it."""

    class Full:
        """os for files.py, but a file's replacement fails as on a full disk."""

        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def replace(source, target):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), source)

    monkeypatch.setattr(files, "os", Full())
    monkeypatch.setattr(plots, "figures", lambda analysis: dict.fromkeys(TABLES))  # no drawing: not the point here
    monkeypatch.setattr(plots, "png", lambda figure: b"PNG")
    status, _, err = run(capsys, "analyze", "linear", "--steps", "2", "--radius", "1", "-o", tmp_path)
    assert status == 3 and f"{tmp_path / 'gradient_norms.png'}: No space left on device" in err, err
    assert ".tmp" not in err and list(tmp_path.iterdir()) == []


def test_ctrl_c_while_the_cli_loads_exits_130_quietly(monkeypatch, capsys):
    """A KeyboardInterrupt while `bptt` imports its modules (SymPy, NumPy: about a second)."""

    class Interrupted(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "bptt.app.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "bptt.app.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    with pytest.raises(SystemExit) as exit:
        start.run()
    assert exit.value.code == 130 and capsys.readouterr() == ("", "")


def test_ctrl_c_in_a_model_file_exits_130_quietly(capsys, tmp_path):
    path = tmp_path / "slow.py"
    path.write_text("raise KeyboardInterrupt\n", encoding="utf-8")
    assert run(capsys, "latex", f"{path}:make") == (130, "", "")


# `python -m bptt latex elman`, but the first module the CLI imports (bptt.app.cli) waits, once it has told the
# test so (the file argv[1]), until a signal ends the wait (or ten minutes, should the test never send it): the
# test's SIGINT cannot come too late or too early.
WAITS_WHILE_THE_CLI_LOADS = """
import importlib.abc, pathlib, runpy, sys, time

READY = pathlib.Path(sys.argv[1])

class Waits(importlib.abc.MetaPathFinder):
    loading = False

    def find_spec(self, name, path=None, target=None):
        if self.loading:  # the CLI module runs: this is its first import of a module not yet loaded
            sys.meta_path.remove(self)
            READY.touch()
            for _ in range(60000):
                time.sleep(0.01)
        self.loading = name == "bptt.app.cli"

sys.meta_path.insert(0, Waits())
sys.argv[1:] = ["latex", "elman"]
runpy.run_module("bptt", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_early_in_a_real_process_exits_130_quietly(tmp_path):
    """A real SIGINT to a real `bptt` process while it loads the CLI's modules: exit 130, nothing printed."""
    ready = tmp_path / "ready"
    child = subprocess.Popen(
        [sys.executable, "-c", WAITS_WHILE_THE_CLI_LOADS, str(ready)],
        cwd=REPO,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    while not ready.exists() and child.poll() is None:
        time.sleep(0.01)
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=600)
    assert ready.exists(), f"the CLI never imported a module: exit {child.returncode}, {err.decode()}"
    assert (child.returncode, out, err) == (130, b"", b"")


# The generated modules, the same cases in every backend: (module, array maker, a maker of an rng). Nothing here
# may start JAX while the suite is collected: a test should not pay for JAX's start-up at collection.
BACKENDS = {
    "numpy": (
        lambda name: importlib.import_module(f"bptt.generated.{name}"),
        np.asarray,
        lambda: np.random.default_rng(0),
    ),
    "torch": (lambda name: importlib.import_module(f"bptt.generated.{name}_torch"), torch.as_tensor, lambda: None),
    "jax": (lambda name: importlib.import_module(f"bptt.generated.{name}_jax"), jnp.asarray, lambda: jax.random.key(0)),
}
SIZES = {"d": 2, "h": 3, "q": 4}


def problem(backend, name="elman"):
    """(module, array maker, params, xs, ys) of a zoo model in a backend, from the NumPy module's draws."""
    module_of, array, _ = BACKENDS[backend]
    reference = importlib.import_module(f"bptt.generated.{name}")
    params = reference.init_params(np.random.default_rng(0), **SIZES)
    xs, ys = reference.random_inputs(np.random.default_rng(1), 3, 2, **SIZES)
    return module_of(name), array, {k: array(v) for k, v in params.items()}, array(xs), array(ys), (params, xs, ys)


def value_error(call, *fragments):
    with pytest.raises(ValueError) as caught:
        call()
    assert "\n" not in str(caught.value)
    for fragment in fragments:
        assert fragment in str(caught.value), f"{fragment!r} not in {caught.value}"


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("odd", ["U", "W", "c"])
def test_a_parameter_of_another_dtype_is_the_one_named(backend, odd):
    """Mixed float32/float64 parameters: the error names the one whose dtype differs (the first, too)."""
    module, array, params, xs, ys, (reference, _, _) = problem(backend)
    params[odd] = array(reference[odd].astype(np.float32))
    value_error(lambda: module.loss_and_grads(params, xs, ys), f"params['{odd}'] has dtype float32; expected float64")


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize(
    "T, B, named", [(0, 2, "T"), (-1, 2, "T"), (1.5, 2, "T"), (True, 2, "T"), (2, 0, "B"), (2, "2", "B")]
)
def test_random_inputs_refuses_a_length_that_is_no_positive_integer(backend, T, B, named):
    module, _, make_rng = BACKENDS[backend]
    rng = make_rng()
    value_error(lambda: module("elman").random_inputs(rng, T, B, **SIZES), f"{named} must be a positive integer")
    value_error(lambda: module("elman").random_inputs(rng, 2, 2, **{**SIZES, "h": 0}), "size h must be a positive")
    xs, ys = module("elman").random_inputs(rng, np.int64(2), 3, **SIZES)  # a NumPy integer is a length
    assert tuple(xs.shape) == (2, 3, 2) and tuple(ys.shape) == (2, 3)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_labels_of_any_integer_dtype_are_accepted(backend):
    """Labels (elman-onehot's inputs and targets) in any integer dtype give the int64 labels' results."""
    module, array, params, xs, ys, (_, raw_xs, raw_ys) = problem(backend, "elman_onehot")
    loss, grads = module.loss_and_grads(params, xs, ys)
    outputs, _ = module.forward(params, xs)
    for dtype in ("uint8", "uint32", "uint64", "int16"):
        other_xs, other_ys = array(raw_xs.astype(dtype)), array(raw_ys.astype(dtype))
        other_loss, other = module.loss_and_grads(params, other_xs, other_ys)
        assert float(other_loss) == float(loss), dtype
        assert all(np.array_equal(np.asarray(other[key]), np.asarray(grads[key])) for key in grads), dtype
        assert np.array_equal(np.asarray(module.losses(outputs, other_ys)), np.asarray(module.losses(outputs, ys)))


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_label_out_of_range_is_named_as_given_in_every_integer_dtype(backend):
    module, array, params, xs, _, (_, _, raw_ys) = problem(backend)
    huge = raw_ys.astype(np.uint64)
    huge[1, 0] = 2**63 + 7
    value_error(lambda: module.loss_and_grads(params, xs, array(huge)), f"ys holds label {2**63 + 7}", "range(4)")


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("g_max", ["5", 0, -1.0, float("nan"), True, None])
def test_clip_grads_refuses_a_theta_that_is_no_positive_number(backend, g_max):
    module, _, params, xs, ys, _ = problem(backend)
    _, grads = module.loss_and_grads(params, xs, ys)
    value_error(lambda: module.clip_grads(grads, g_max), "g_max must be a positive number", repr(g_max))
    clipped = module.clip_grads(grads, np.float32(1e-3))  # a NumPy number is a number
    norm = np.sqrt(sum(float(np.sum(np.square(np.asarray(g)))) for g in clipped.values()))
    assert abs(norm - 1e-3) < 1e-9


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("dtype", ["int64", "float16", "bool"])
def test_losses_refuses_outputs_of_a_dtype_the_modules_do_not_compute_in(backend, dtype):
    module, array, params, xs, ys, _ = problem(backend)
    outputs, _ = module.forward(params, xs)
    bad = array(np.asarray(outputs).astype(dtype))
    value_error(lambda: module.losses(bad, ys), f"outputs has dtype {dtype}; expected float32 or float64")


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_truncation_lengths_may_be_numpy_integers_but_not_bools(backend):
    module, _, params, xs, ys, _ = problem(backend)
    _, python = module.loss_and_grads(params, xs, ys, truncate=("window", 2))
    _, numpy = module.loss_and_grads(params, xs, ys, truncate=("window", np.int64(2)))
    assert all(np.array_equal(np.asarray(python[key]), np.asarray(numpy[key])) for key in python)
    for value in (np.True_, True):
        value_error(
            lambda v=value: module.loss_and_grads(params, xs, ys, truncate=("chunk", v)), "k must be an integer"
        )


def test_the_notebook_refuses_bad_arguments_naming_them():
    with pytest.raises(TypeError, match="model must be a zoo name, 'path/to/file.py:function' or a Model, got int"):
        notebook.derive(42)
    with pytest.raises(TypeError, match="got NoneType"):
        notebook.analyze(None)
    for kwargs, says in [
        ({"steps": 1.5}, "steps must be an integer >= 1, got 1.5"),
        ({"steps": 0}, "steps must be an integer >= 1, got 0"),
        ({"seed": -1}, "seed must be an integer >= 0, got -1"),
        ({"radii": ()}, "radii must be one or more positive numbers"),
        ({"radii": (0,)}, "radii must be one or more positive numbers, e.g. (0.5, 1, 1.5); got (0,)"),
        ({"radii": (-1,)}, "got (-1,)"),
        ({"radii": 1.5}, "got 1.5"),
        ({"g_max": "1"}, "g_max must be a positive number, got '1'"),
    ]:
        value_error(lambda kwargs=kwargs: notebook.analyze("linear", **kwargs), says)
    view = notebook.analyze(load("linear"), steps=np.int64(2), radii=iter([1.0]))
    assert view.analysis.radii == (1.0,) and view.table("clipping").name == "clipping"
    value_error(lambda: view.table("nosuch"), "no table 'nosuch'; the tables are gradient_norms, eigenvalues")
