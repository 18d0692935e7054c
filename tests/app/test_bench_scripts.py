"""The README's benchmark scripts are commands of the installed package (app/bench/): each `python3 -m ...` the
README names is a module of the checkout that runs as a program, and no command runs a file outside it."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"`python3? (-m )?([\w./-]+)")  # a command the README tells a reader to run


def commands():
    """(run as a module, its target) of every `python ...` command in the README, pip, venv and pytest aside."""
    found = COMMAND.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    return [(bool(flag), target) for flag, target in found if target not in ("pip", "venv", "pytest")]


def runs_as_a_program(path):
    """Whether the module has an `if __name__ == "__main__":` block."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
            return True
    return False


def test_the_readme_runs_every_benchmark_as_a_module_of_the_package():
    scripts = [target for as_module, target in commands() if target.startswith("bptt.app.bench.")]
    assert len(scripts) >= 4, commands()  # the speed tables, every module's times, bounded memory, budgets
    outside = [target for as_module, target in commands() if not as_module]
    assert outside == [], f"run as `python3 -m bptt...`, so that the command works from an install too: {outside}"
    for target in scripts:
        path = ROOT.joinpath(*target.split(".")[1:]).with_suffix(".py")
        assert path.is_file() and runs_as_a_program(path), target


def test_no_second_home_for_benchmarks():
    assert list((ROOT / "benchmarks").glob("*.py")) == []
