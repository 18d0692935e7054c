"""How the templates write a tuple of strings (PARAMS, TEACHER_FORCED): the checks of a module's arguments are
the runtime's (runtime/<backend>_passes.py), which reads the module's _Spec."""


def pytuple(items):
    """A tuple of strings as Python writes it: ("T", "B", "h"), ("h",)."""
    return "(" + ", ".join(f'"{item}"' for item in items) + ("," if len(items) == 1 else "") + ")"
