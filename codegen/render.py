"""Render derivations and modules through the Jinja2 templates, and write files atomically."""

import os
import pathlib
import tempfile

import jinja2
from bptt.derive.document import sections

from .program import context

TEMPLATES = pathlib.Path(__file__).parent / "templates"

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
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
_env.filters["pytuple"] = lambda items: (
    "(" + ", ".join(f'"{i}"' for i in items) + ("," if len(items) == 1 else "") + ")"
)


def module_source(model):
    """The source of generated/<model>.py."""
    return _env.get_template("module.py.j2").render(context(model))


def document(model, fmt="tex"):
    """The derivation as a standalone LaTeX document ("tex") or Markdown ("md")."""
    return _env.get_template(f"derivation.{fmt}.j2").render(model=model, sections=sections(model))


def module_filename(model):
    return model.name.replace("-", "_") + ".py"


def _default_mode():
    """The permissions a new file gets under the current umask (0o644 for umask 022)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path, text):
    """Write text to path so that readers see the old file or the new one, never half of it."""
    path = pathlib.Path(path)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else _default_mode())
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
