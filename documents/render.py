"""Render a derivation's sections as a standalone LaTeX or Markdown document."""

import pathlib

import jinja2

from bptt.documents.document import sections
from bptt.documents.equation import Display, Figure, Table

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(pathlib.Path(__file__).parent / "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,
)
_TEX_SPECIAL = {
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
}
_env.filters["texescape"] = lambda text: "".join(_TEX_SPECIAL.get(char, char) for char in str(text))
_TEMPLATES = {Display: "display", Figure: "figure", Table: "table"}  # an item's type -> its template's name


def _show(item, fmt):
    """An item of a section (a display, a figure, a table) in its own template."""
    return _env.get_template(f"{_TEMPLATES[type(item)]}.{fmt}.j2").render(item=item).rstrip("\n")


_env.globals["show"] = _show


def document(model, fmt="tex", only=None):
    """The derivation as a standalone LaTeX document ("tex") or Markdown ("md"); `only`: the names of the
    sections to show (document.NAMES), every one by default."""
    command = model.command_name + (f" --sections {','.join(only)}" if only else "")
    return _env.get_template(f"derivation.{fmt}.j2").render(
        model=model, command=command, sections=sections(model, only)
    )
