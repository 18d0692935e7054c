"""The lines of a module's fixed parts that depend on the model: the checks of its arguments and the draws
of random_inputs, decided here for every backend (the templates only place them). Backends differ in
the calls' last arguments, written by their CheckStyle."""

from dataclasses import dataclass

import sympy as sp

AXES = {"T": 0, "B": 1}  # time-major arrays: (T, B, ...)


@dataclass(frozen=True)
class CheckStyle:
    """How one backend's fixed parts check and draw arrays.

    device: the checks take the device (torch), and _check_array its `finite` positionally before it.
    batch: the sizes read off the checked input (NumPy T, B; JAX B; torch none: `sizes` has them).
    no_state: what an initial state given as None becomes ({size}: its size): None, or JAX's zeros.
    draw_labels, draw_floats: random_inputs' draw of labels or floats ({name}, {rows}, {key})."""

    device: bool
    batch: tuple
    no_state: str
    draw_labels: str
    draw_floats: str

    def labels(self, label, sizes, classes, device="device"):
        tail = f", {device}" if self.device else ""
        return f'_check_labels("{label}", {label}, {sizes}, "{classes}"{tail})'

    def array(self, label, dims, sizes, dtype, finite=None, device="device"):
        """A _check_array call; finite: its code, or None for the default (True)."""
        if self.device:
            tail = f", {finite or 'True'}" + (f", {device}" if device else "")
        else:
            tail = "" if finite is None else f", finite={finite}"
        return f'_check_array("{label}", {label}, {pytuple(dims)}, {sizes}, {dtype}{tail})'


def pytuple(items):
    """A tuple of strings as Python writes it: ("T", "B", "h"), ("h",)."""
    return "(" + ", ".join(f'"{item}"' for item in items) + ("," if len(items) == 1 else "") + ")"


def from_shape(names, array):
    """The line binding sizes from an array's shape: `T, B = xs.shape[0], xs.shape[1]`."""
    return f"{', '.join(names)} = {', '.join(f'{array}.shape[{AXES[name]}]' for name in names)}"


def input_checks(facts, style, finite=None):
    """The checks of xs (then ys when teacher-forced) and the initial states, binding T and B as the backend does."""
    x, y = facts.input, facts.target
    if x.labels:
        lines = [f"{x.name} = {style.labels('xs', 'sizes', x.rows)}"]
    else:
        lines = [f"{x.name} = {style.array('xs', ('T', 'B', x.rows), 'sizes', 'dtype', finite)}"]
    lines += [from_shape(style.batch, x.name)] if style.batch else []
    lines += [f"{y.name} = {style.labels('ys', 'sizes', y.rows)}"] if facts.forced else []
    for name, size in facts.states:
        check = style.array(f"{name}0", ("B", size), "sizes", "dtype", finite)
        lines.append(f"{name}0 = {style.no_state.format(size=size)} if {name}0 is None else {check}")
    return tuple(lines)


def target_checks(facts, style, sizes="sizes"):
    """The check of the targets ys (none when teacher-forced: input_checks has checked them)."""
    y = facts.target
    if facts.forced:
        return ()
    if y.labels:
        return (f"{y.name} = {style.labels('ys', sizes, y.rows)}",)
    return (f"{y.name} = {style.array('ys', ('T', 'B', y.rows), sizes, 'dtype')}",)


def losses_checks(facts, style):
    """losses' checks: the outputs (any float dtype, not scanned for nan), the targets in their dtype and device."""
    s, y = facts.output, facts.target
    dtype = '_float_dtype("outputs", outputs)'
    lines = [f"{s.name} = {style.array('outputs', ('T', 'B', s.rows), 'sizes', dtype, 'False', device=None)}"]
    if y.labels:
        lines.append(f"{y.name} = {style.labels('ys', 'sizes', y.rows, device=f'{s.name}.device')}")
    else:
        check = style.array("ys", ("T", "B", y.rows), "sizes", f"{s.name}.dtype", device=f"{s.name}.device")
        lines.append(f"{y.name} = {check}")
    return tuple(lines)


def draws(facts, style):
    """random_inputs' draws of xs and ys, each of the kind the model takes."""
    lines = []
    for name, key, array in (("xs", "x_key", facts.input), ("ys", "y_key", facts.target)):
        draw = style.draw_labels if array.labels else style.draw_floats
        lines.append(draw.format(name=name, key=key, rows=rows_code(array.rows)))
    return tuple(lines)


def rows_code(rows):
    """Code of a row count from the sizes dict: `sizes["d"]`, or `2 * sizes["d"]` for a multiple."""
    expr = sp.sympify(rows)
    return str(expr.subs({size: sp.Symbol(f'sizes["{size}"]') for size in expr.free_symbols})).replace("*", " * ")


@dataclass(frozen=True)
class Checks:
    """The model's fixed-part lines every backend's template places: the checks of forward's arguments
    (input), of the targets (target), losses' checks, and random_inputs' draws."""

    input: tuple
    target: tuple
    losses: tuple
    draws: tuple


def checks(facts, style):
    return Checks(
        input_checks(facts, style), target_checks(facts, style), losses_checks(facts, style), draws(facts, style)
    )
