"""The Jinja2 environment a backend lays its module out with: one per backend folder, which holds the template."""

import pathlib

import jinja2


def environment(folder):
    """An environment loading the templates of `folder` (a backend's package)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(pathlib.Path(folder)),
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    env.filters["pytuple"] = lambda items: (
        "(" + ", ".join(f'"{i}"' for i in items) + ("," if len(items) == 1 else "") + ")"
    )
    return env
