"""A fourth backend is one folder and one registry entry: a toy backend (NumPy's printer under another name)
in a temporary folder, registered by an entry point of the group codegen/backends.py reads, and nothing else
touched, works in `bptt codegen`, `bptt check` and `bptt bench`, each run as a user runs it (a process of its
own, the folder on PYTHONPATH)."""

import textwrap

import pytest

from bptt.codegen.adapter import Adapter, MissingFramework
from bptt.codegen.backends import BACKENDS, ENTRY_POINTS
from bptt.tests.support.cli import USER_MODELS, assert_ok, bptt, pythonpath

MARK = "# printed by the toy backend"

ADAPTER = '''
"""The toy backend: NumPy's module, marked, under the name toy."""

from bptt.codegen.adapter import Adapter


class ToyAdapter(Adapter):
    name, title, suffix, framework, extra = "toy", "Toy", "_toy", "numpy", ""
    renderer, runtime = "toy_backend.render", "bptt.runtime.numpy"

    def array(self, value):
        return value.copy()  # its own arrays: what the app hands it is converted, never shared


ADAPTER = ToyAdapter()
'''

RENDER = f'''
from bptt.codegen.numpy import render


def module_source(model, program, standalone):
    return "{MARK}\\n" + render.module_source(model, program, standalone)
'''


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """(the folder on PYTHONPATH holding the toy backend and its entry point, the user's model file)."""
    root = tmp_path_factory.mktemp("toy")
    folder = root / "toy_backend"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "adapter.py").write_text(textwrap.dedent(ADAPTER))
    (folder / "render.py").write_text(textwrap.dedent(RENDER))
    entry = root / "toy_backend-0.1.dist-info"  # the one registry entry: an entry point naming the adapter
    entry.mkdir()
    (entry / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend\nVersion: 0.1\n")
    (entry / "entry_points.txt").write_text(f"[{ENTRY_POINTS}]\ntoy = toy_backend.adapter\n")
    model = root / "models.py"
    model.write_text(USER_MODELS)
    return root, model


def test_the_toy_is_not_registered_without_its_entry():
    assert "toy" not in BACKENDS


def test_codegen_writes_the_toy_backends_module(toy, tmp_path):
    root, model = toy
    env = pythonpath(root)
    result = bptt("codegen", f"{model}:sigmoid_rnn", "--backend", "toy", "--out", tmp_path, env=env)
    assert_ok(result)
    written = tmp_path / "sigmoid_rnn_toy.py"
    assert result.stdout == f"wrote {written}\n"
    assert_ok(bptt("codegen", f"{model}:sigmoid_rnn", "--out", tmp_path, env=env))
    numpy_module = (tmp_path / "sigmoid_rnn.py").read_text()
    assert written.read_text() == f"{MARK}\n{numpy_module}"
    checked = bptt("codegen", f"{model}:sigmoid_rnn", "--backend", "all", "--out", tmp_path, "--check", env=env)
    missing = {line.split("/")[-1] for line in checked.stdout.splitlines() if line.startswith("missing: ")}
    assert checked.returncode == 1 and missing == {"sigmoid_rnn_torch.py", "sigmoid_rnn_jax.py"}, checked.stdout


def test_check_checks_the_toy_module_against_numpy(toy):
    root, model = toy
    result = bptt("check", f"{model}:sigmoid_rnn", "--backend", "toy", "--steps", "3", env=pythonpath(root))
    assert_ok(result)
    assert result.stdout.startswith("sigmoid-rnn (toy module): full BPTT T=3"), result.stdout
    assert "against the NumPy module:" in result.stdout
    assert result.stdout.rstrip().endswith("and the toy module's loss, outputs and gradients with the NumPy module's")


def test_bench_times_the_toy_module_against_numpy(toy):
    root, model = toy
    args = ("--steps", "3", "--batch", "2", "--repeats", "1", "--sizes", "d=2,h=3,q=2", "--dtype", "float64")
    result = bptt("bench", f"{model}:sigmoid_rnn", "--backend", "toy", *args, env=pythonpath(root))
    assert_ok(result)
    assert "sigmoid-rnn, generated for toy: calls per step:" in result.stdout, result.stdout
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    assert rows["generated"][1] != "-" and rows["numpy"][1] != "-", result.stdout  # both timed
    assert float(rows["numpy"][6]) == 0.0  # NumPy's module under another name: the same numbers


def test_a_backend_whose_framework_is_missing_names_its_extra():
    """Bench's parent finds the framework without importing it (Adapter.installed), check imports it
    (Adapter.load): a framework that is not installed is the same one line from both, naming the extra."""

    class Absent(Adapter):
        name, framework, extra = "absent", "bptt_no_such_framework", "absent"

    line = r"^the absent backend needs bptt_no_such_framework, which is not installed: pip install 'bptt\[absent\]'$"
    for call in (Absent().installed, Absent().load):
        with pytest.raises(MissingFramework, match=line):
            call()
    assert BACKENDS["numpy"].installed() is None
