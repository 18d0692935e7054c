"""Names a printed NumPy body reads, bound at its top: parameters from params, arrays from the cache or
the workspace, sizes from sizes, T and B from an array's shape."""

from dataclasses import dataclass

from bptt.codegen.names import shown
from bptt.codegen.printing.columns import STEP, WIDTH
from bptt.codegen.printing.printer import size_name

UNPACKED = WIDTH - 2 * len(STEP)  # the unpacked names stay on one line inside a `with` block


@dataclass(frozen=True)
class Printed:
    """A printed body: its lines, and the helpers it calls, the parameters, arrays and sizes it reads."""

    lines: tuple
    helpers: frozenset
    params: frozenset
    arrays: frozenset
    sizes: frozenset

    @classmethod
    def of(cls, lines, used, arrays=None):
        """The body of lines from a printer that recorded `used`; arrays: those it reads if not all it used."""
        arrays = used.arrays if arrays is None else arrays
        return cls(tuple(lines), *(frozenset(names) for names in (used.helpers, used.params, arrays, used.sizes)))


def quoted(name):
    return f'"{name}"'


def sized(used, model, grouped=False):
    """The bindings of the sizes used, `n_h = sizes["h"]`; grouped: on one line, `n_d, n_h = sizes["d"], ...`."""
    names = [(size_name(s), f'sizes["{s}"]') for s in model.sizes if str(s) in used]
    if grouped and names:
        return [f"{', '.join(name for name, _ in names)} = {', '.join(value for _, value in names)}"]
    return [f"{name} = {value}" for name, value in names]


def output_adjoint(model):
    return f"d_{model.outputs[0][0].name}"


def time_and_batch(used, array):
    """T and B from an array's shape, those of them a body uses."""
    wanted = [(name, axis) for axis, name in enumerate(("T", "B")) if name in used]
    if not wanted:
        return []
    return [", ".join(n for n, _ in wanted) + " = " + ", ".join(f"{array}.shape[{axis}]" for _, axis in wanted)]


def initial_keys(model):
    return [(f"{seq.name}0", seq) for seq in model.states]


def params_bound(names, model):
    """Bindings of the named parameters from params, in the model's order (every one: one unpacking)."""
    return unpacked([p.name for p in model.params], names, "params", "PARAMS")


def unpacked(every, names, source, constant):
    """Bindings of the named entries of the dict `source`, whose keys are `every`, the module's `constant`:
    all of them one unpacking in that order when its names fit their line, else one line each."""
    first = f"{', '.join(every)} = ("  # the first line of the unpacking, laid out (columns.py)
    if len(every) > 1 and set(every) <= set(names) and len(shown(first)) <= UNPACKED:
        return [f"{first}{source}[name] for name in {constant})"]
    return [f"{name} = {source}[{quoted(name)}]" for name in every if name in names]


def bound(used, model, work, cache, views=None):
    """Bindings of the params, cache arrays, work arrays and sizes a body used (not its arguments); cache: the
    names CACHE holds, in its order; views: {name: what it is a view of} for the work arrays that are views of
    another (said where bound)."""
    head = params_bound(used.params, model)
    cached = set(cache) & used.arrays
    if cached == set(cache):
        head += unpacked(list(cache), cached, "cache", "CACHE")
    else:
        head += grouped(sorted(cached, key=order(model)), "cache")
    worked = sorted(used.arrays & work - set(cache))
    head += grouped([name for name in worked if name not in (views or {})], "work")
    head += [work_bound(name, views) for name in worked if name in (views or {})]
    head += sized(used.sizes, model)
    return head


def grouped(names, source):
    """Bindings of the named entries of the dict `source`, `a, b = source["a"], source["b"]`: as many names to a
    line as fit on it."""
    lines, group = [], []
    for name in names:
        if group and len(shown(binding([*group, name], source))) > UNPACKED:
            lines.append(binding(group, source))
            group = []
        group.append(name)
    return lines + ([binding(group, source)] if group else [])


def binding(names, source):
    return f"{', '.join(names)} = {', '.join(f'{source}[{quoted(name)}]' for name in names)}"


def work_bound(name, views):
    """`name = work["name"]`, and what it is a view of when it is one: `# a view of _i_f_o_g[..., :n_h]`."""
    line = f"{name} = work[{quoted(name)}]"
    return f"{line}  # {views[name]}" if name in views else line


def order(model):
    names = [s.name for s in model.inputs + model.states + model.intermediates]
    return lambda name: names.index(name) if name in names else len(names)
