"""The NumPy backend's module: the shared layout of a program, through this folder's template."""

import pathlib

from bptt.codegen.printing.layout import layout
from bptt.codegen.printing.templates import environment

_env = environment(pathlib.Path(__file__).parent)


def module_source(model, program=None):
    """The source of generated/<model>.py; program: the model's statements (program.build's if None)."""
    return _env.get_template("module.py.j2").render(m=layout(model, program))
