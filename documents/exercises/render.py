"""An exercise's problem sheet and solution sheet, as standalone LaTeX or Markdown."""

import pathlib

import jinja2

from bptt.derive.direction import forward_only
from bptt.documents.exercises.sheets import problem_parts, solution_parts
from bptt.documents.exercises.solve import exercise
from bptt.documents.text import md_text, tex_text

FORMATS = ("tex", "md")
KINDS = {"problems": ("Problem sheet", problem_parts), "solutions": ("Solutions", solution_parts)}

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(pathlib.Path(__file__).parent / "templates"),
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,
)
_env.filters |= {"texescape": tex_text, "mdescape": md_text}


def sheets(model, seed, fmt="tex"):
    """{"problems": text, "solutions": text}: the two sheets of the seed's exercise on model."""
    forward_only(model, "the exercises")
    found, worked = exercise(model, seed)
    template = _env.get_template(f"sheet.{fmt}.j2")
    return {
        name: template.render(model=model, seed=seed, kind=kind, parts=parts(found, worked))
        for name, (kind, parts) in KINDS.items()
    }
