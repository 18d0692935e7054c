"""The Jinja2 environment a backend lays its module out with: one per backend folder, which holds the
template; printing/ holds what every backend's template shares (module_head.py.j2)."""

import pathlib

import jinja2

from bptt.codegen.printing.checks import pytuple
from bptt.codegen.printing.work import literal

PRINTING = pathlib.Path(__file__).parent


def body(lines, depth=1):
    """Lines of a function body, each indented `depth` levels (a blank line stays empty), one string."""
    return "\n".join("    " * depth + line if line else "" for line in lines)


def table(rows, prefix="", suffix="", comment=""):
    """prefix, then a dict of (key, value, ...) rows as Python writes it, on one line if it fits (work.literal);
    suffix: what each key ends in (an initial state's 0); comment: after it, or above it if it takes lines."""
    text = prefix + literal({f"{row[0]}{suffix}": row[1] for row in rows}, prefix)
    if not comment:
        return text
    return f"{text}  # {comment}" if "\n" not in text else f"# {comment}\n{text}"


def environment(folder):
    """An environment loading the templates of `folder` (a backend's package), then printing/'s."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([pathlib.Path(folder), PRINTING]),
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters["pytuple"] = pytuple
    env.filters["body"] = body
    env.filters["table"] = table
    return env
