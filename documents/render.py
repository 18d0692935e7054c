"""Render a derivation's sections as a standalone LaTeX or Markdown document."""

import pathlib

import jinja2

from bptt.documents.document import sections

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


def document(model, fmt="tex"):
    """The derivation as a standalone LaTeX document ("tex") or Markdown ("md")."""
    return _env.get_template(f"derivation.{fmt}.j2").render(model=model, sections=sections(model))
