"""Render a derivation's sections as a standalone LaTeX or Markdown document."""

import pathlib
from dataclasses import replace

import jinja2

from bptt.documents.document import sections
from bptt.documents.equation import Display, Figure, Table
from bptt.documents.text import md_code, md_destination, md_text, tex_path, tex_text

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(pathlib.Path(__file__).parent / "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,
)
# A user's text (a title, a source, a file's path) shown as written: documents/text.py.
_env.filters |= {
    "texescape": tex_text,
    "texpath": tex_path,
    "mdescape": md_text,
    "mdcode": md_code,
    "mdlink": md_destination,
}
_TEMPLATES = {Display: "display", Figure: "figure", Table: "table"}  # an item's type -> its template's name


def _show(item, fmt, **context):
    """An item of a section (a display, a figure, a table) in its own template; context: more of its variables
    (a figure's label)."""
    return _env.get_template(f"{_TEMPLATES[type(item)]}.{fmt}.j2").render(item=item, **context).rstrip("\n")


_env.globals["show"] = _show
_env.globals["is_figure"] = lambda item: isinstance(item, Figure)  # set first in its section, before the text


def document(model, fmt="tex", only=None, figures=None):
    """The derivation as a standalone LaTeX document ("tex") or Markdown ("md"); `only`: the names of the
    sections to show (document.NAMES), every one by default; `figures` as for rendered()."""
    return rendered(model, sections(model, only), fmt, only, figures)


def rendered(model, chosen, fmt="tex", only=None, figures=None):
    """The document of sections already built (document.sections(model, only)). figures, for Markdown: a file
    name stem, to link each figure as the image figure_files(chosen, stem) names instead of inlining its SVG
    (GitHub's Markdown drops inline SVG); None inlines them (notebooks)."""
    if figures is not None:
        names = iter(figure_files(chosen, figures))
        chosen = [
            replace(s, items=tuple(replace(i, file=next(names)) if isinstance(i, Figure) else i for i in s.items))
            for s in chosen
        ]
    command = model.command_name + (f" --sections {','.join(only)}" if only else "")
    return _env.get_template(f"derivation.{fmt}.j2").render(model=model, command=command, sections=chosen)


def figure_files(chosen, stem):
    """{file name: SVG} of the figures of the sections, in order: stem-figure-1.svg, stem-figure-2.svg, ..."""
    found = [item for section in chosen for item in section.items if isinstance(item, Figure)]
    return {f"{stem}-figure-{n}.svg": figure.svg for n, figure in enumerate(found, 1)}
