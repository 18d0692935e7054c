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


def sized(used, model):
    return [f'{size_name(s)} = sizes["{s}"]' for s in model.sizes if str(s) in used]


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
    """Bindings of the named parameters from params, in the model's order: every parameter one unpacking of
    PARAMS's order when it fits its line, else one line each."""
    every = [p.name for p in model.params]
    unpacked = f"{', '.join(every)} = ("  # the first line of the unpacking, laid out (columns.py)
    if len(every) > 1 and set(every) <= set(names) and len(shown(unpacked)) <= UNPACKED:
        return [f"{unpacked}params[name] for name in PARAMS)"]
    return [f"{name} = params[{quoted(name)}]" for name in every if name in names]


def bound(used, model, work, cache, views=None):
    """Bindings of the params, cache arrays, work arrays and sizes a body used (not its arguments);
    views: {name: what it is a view of} for the work arrays that are views of another (said where bound)."""
    head = params_bound(used.params, model)
    head += [f"{name} = cache[{quoted(name)}]" for name in sorted(used.arrays & cache, key=order(model))]
    head += [work_bound(name, views or {}) for name in sorted(used.arrays & work - cache)]
    head += sized(used.sizes, model)
    return head


def work_bound(name, views):
    """`name = work["name"]`, and what it is a view of when it is one: `# a view of _i_f_o_g[..., :n_h]`."""
    line = f"{name} = work[{quoted(name)}]"
    return f"{line}  # {views[name]}" if name in views else line


def order(model):
    names = [s.name for s in model.inputs + model.states + model.intermediates]
    return lambda name: names.index(name) if name in names else len(names)
