"""The module of a model with reverse-time states: each of its groups of steps (derive/sweep_models.py) printed
as a module of a forward-only model by the backend's own render, its maths and tables kept under a prefix
(`_sweep2_forward`, `_sweep2_PASSES`), its public shells dropped; then the model's public functions, which the
backend's runtime (runtime/<backend>_sweeps.py) runs group by group."""

import ast
import sys
from dataclasses import dataclass

from bptt.codegen.printing.helpers import helpers
from bptt.codegen.printing.layout import STANDALONE
from bptt.codegen.program import shape_of
from bptt.derive.direction import sweeps
from bptt.derive.refusal import Refusal
from bptt.derive.sweep_models import sweep_models
from bptt.derive.text import equation

SHELLS = ("init_params", "random_inputs", "forward", "backward", "loss_and_grads", "forward_mode_grads")


@dataclass(frozen=True)
class Statement:
    """A top-level statement of a group's module, prefixed: its source, the names it binds and those it reads."""

    source: str
    binds: frozenset
    reads: frozenset


def _segment(lines, node):
    """ast.get_source_segment(source, node) from the source's lines, split once (it splits the whole source, a
    character at a time, on every call); offsets count UTF-8 bytes, as the parser's do."""
    first, last = node.lineno - 1, node.end_lineno - 1
    rows = [line.encode() for line in lines[first : last + 1]]
    rows[-1] = rows[-1][: node.end_col_offset]
    rows[0] = rows[0][node.col_offset :]
    return b"\n".join(rows).decode()


def prefixed(source, prefix):
    """(import lines, the other top-level statements, each a Statement with every name they bind prefixed): a
    group's module without its docstring and public shells (but losses, which the last group's hands the model)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    imports, kept = [], []
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            imports.append(_segment(lines, statement))
        elif not isinstance(statement, ast.Expr) and getattr(statement, "name", None) not in SHELLS:
            kept.append(statement)
    bound = set().union(*map(_binds, kept))
    edits = []
    for statement in kept:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id in bound:
                edits.append((node.lineno, node.col_offset, node.id))
            elif isinstance(node, ast.FunctionDef) and node.name in bound:
                col = lines[node.lineno - 1].index("def ") + 4
                edits.append((node.lineno, col, node.name))
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                local = {a.arg for a in node.args.args} if hasattr(node.args, "args") else set()
                if local & bound:
                    raise Refusal(f"a group's function binds {sorted(local & bound)}, a name of its module")
    for row, col, name in sorted(edits, reverse=True):
        lines[row - 1] = lines[row - 1][:col] + _prefix(prefix, name) + lines[row - 1][col + len(name) :]
    body = []
    for statement in kept:
        first = statement.lineno - len(getattr(statement, "decorator_list", ()))
        reads = {node.id for node in ast.walk(statement) if isinstance(node, ast.Name)}
        binds = frozenset(_prefix(prefix, name) for name in _binds(statement))
        reads = frozenset(_prefix(prefix, name) if name in bound else name for name in reads) - binds
        body.append(Statement("\n".join(lines[first - 1 : statement.end_lineno]), binds, reads))
    return imports, body


def _binds(statement):
    """The names a top-level statement binds."""
    if isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
        return {statement.name}
    targets = getattr(statement, "targets", [])
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def _prefix(prefix, name):
    return f"{prefix}{name}" if name.startswith("_") else f"{prefix}_{name}"


def _live(statements, roots):
    """The statements that bind a name `roots` read, or one that a statement kept reads, in their order: a
    module carries only what it calls (a group's losses but the last's, its apply, its autograd glue go)."""
    wanted, todo = set(), set(roots)
    while todo:
        name = todo.pop()
        wanted.add(name)
        for statement in statements:
            if name in statement.binds:
                todo |= statement.reads - wanted
    return [statement for statement in statements if statement.binds & wanted]


@dataclass(frozen=True)
class SweepsLayout:
    """What a backend's sweeps.py.j2 places: the module's docstring, imports, constants, its initial states as
    keywords (`, h_f0=None, h_b0=None`) and as a tuple (`(h_f0, h_b0, )`), each group's prefixed module, and the
    tables that name the groups for the runtime."""

    docstring: str
    imports: tuple
    constants: str
    states: str
    given: str
    parts: tuple
    tables: str


def layout(model, render, runtime, standalone=False, names=("_Sweeps",), shells_call=()):
    """The SweepsLayout of a model with reverse-time states: render(group model) prints a group's module; names:
    what the module imports of runtime/<runtime>_sweeps.py; shells_call: what the backend's sweeps.py.j2 calls of
    the groups' imports."""
    groups = sweep_models(model)
    imports, bodies = [], []
    for k, group in enumerate(groups, start=1):
        found, body = prefixed(render(group), f"_sweep{k}")
        imports += found
        bodies.append(body)
    tables = _tables(model, groups)
    roots = {node.id for node in ast.walk(ast.parse(tables)) if isinstance(node, ast.Name)}
    parts = []
    for k, (group, body) in enumerate(zip(groups, bodies, strict=True), start=1):
        direction = "in reverse, from step T back to step 1" if group.reverse else "forward"
        assigned = ", ".join(seq.name for seq, _ in group.steps)
        kept = "\n\n\n".join(statement.source for statement in _live(body, roots))
        parts.append(f"# sweep {k}: {assigned}, {direction}\n\n" + kept)
    imports += [
        "from bptt.runtime.sweeps import _Sweep",
        f"from bptt.runtime.{runtime}_sweeps import {', '.join(names)}",
    ]
    used = {"_Sweep", *names, *shells_call, *roots} | {
        node.id for part in parts for node in ast.walk(ast.parse(part)) if isinstance(node, ast.Name)
    }
    if standalone:
        imports, source = _carried(imports, used, runtime)
        parts.insert(0, "# the runtime it calls (bptt.runtime's, carried: --standalone)\n\n" + source)
    else:
        imports = _ordered(imports, used)
    return SweepsLayout(
        docstring=_docstring(model, standalone),
        imports=tuple(imports),
        constants=_constants(model),
        states="".join(f", {seq.name}0=None" for seq in model.states),
        given="(" + "".join(f"{seq.name}0, " for seq in model.states) + ")",
        parts=tuple(parts),
        tables=tables,
    )


def _carried(imports, used, backend):
    """(import lines, the runtime's source) of a standalone module: the used names the import lines take from
    bptt.runtime carried as source with those they call (printing/helpers.py), the other imports kept."""
    wanted, kept = set(), set()
    for statement in ast.parse("\n".join(imports)).body:
        for alias in statement.names:
            if (alias.asname or alias.name.split(".")[0]) not in used:
                continue
            spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
            if isinstance(statement, ast.Import):
                kept.add(f"import {spelled}")
            elif statement.module.split(".")[0] == "bptt":
                wanted.add(alias.name)
            else:
                kept.add(f"from {statement.module} import {spelled}")
    blocks, source = helpers(backend).source(sorted(wanted), tuple(kept), standalone=True)
    return [line for block in blocks for line in (*block.split("\n"), "")][:-1], source


def _ordered(imports, used):
    """The groups' import lines merged (each module's names in one statement, as ruff's isort lays them out) and
    those the kept code does not use dropped (a group's shells, dropped, used them; `x as x` re-exports stay):
    standard library, third party, then bptt, each section's `import` lines before its `from` lines."""
    plain, froms = set(), {}
    for statement in ast.parse("\n".join(imports)).body:
        if isinstance(statement, ast.Import):
            plain |= {(alias.name, alias.asname) for alias in statement.names}
        else:
            froms.setdefault(statement.module, set()).update((a.name, a.asname) for a in statement.names)
    sections = {}
    for name, asname in sorted(plain):
        sections.setdefault(_section(name), []).append(f"import {name}" + (f" as {asname}" if asname else ""))
    for module in sorted(froms):
        bare = sorted((name for name, asname in froms[module] if asname is None and name in used), key=_member)
        lines = [(_member(bare[0]), _from_line(module, bare))] if bare else []
        lines += [(_member(n), f"from {module} import {n} as {a}") for n, a in froms[module] if a]
        sections.setdefault(_section(module), []).extend(line for _, line in sorted(lines))
    return [line for key in sorted(sections) for line in [*sections[key], ""]][:-1]


def _member(name):
    """isort's order of imported names: constants, then classes, then the rest."""
    return (0 if name.isupper() else 1 if name.lstrip("_")[:1].isupper() else 2, name)


def _section(module):
    top = module.split(".")[0]
    return 2 if top == "bptt" else 0 if top in sys.stdlib_module_names else 1


def _from_line(module, names, width=120):
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= width:
        return line
    return f"from {module} import (\n" + "".join(f"    {name},\n" for name in names) + ")"


def _docstring(model, standalone):
    steps = "\n".join(f"    {equation(seq(), rhs)}" for seq, rhs in model.steps + model.outputs)
    order = "; ".join(f"{', '.join(seq.name for seq, _ in sweep.steps)} {sweep.direction}" for sweep in sweeps(model))
    return (
        f'"""{model.title}: forward pass and backpropagation through time.\n\n'
        f"Generated by `bptt codegen {model.command_name}{STANDALONE[standalone]}` from the model's equations; do not "
        "edit by hand.\n"
        f"Source: {model.source}.\n\nOne step at time t (a state read at t+1 runs from step T back to step 1, its "
        f"initial value\nentering after step T):\n\n{steps}\n\nThe steps run as sweeps over time: {order}; each "
        "group of steps below is a forward-only\nmodel (a reverse one over each sequence's steps reversed), run by "
        'the runtime one after the other.\n"""'
    )


def _constants(model):
    shapes = ", ".join(f'"{p.name}": {shape_of(p)!r}' for p in model.params)
    states = ", ".join(f'"{seq.name}0": "{seq.rows}"' for seq in model.states)
    (source,) = model.inputs
    dims = [(source.name, ("T", "B") if source.role == "label" else ("T", "B", str(source.rows)))]
    cache = ", ".join(
        f'"{name}": {rows!r}' for name, rows in dims + [(s.name, ("T+1", "B", str(s.rows))) for s in model.states]
    )
    return (
        f"PARAMS = {tuple(p.name for p in model.params)!r}\nSIZES = {tuple(s.name for s in model.sizes)!r}\n"
        f"SHAPES = {{{shapes}}}\nMEAN = {model.mean}\nTEACHER_FORCED = ()\n"
        f"STATES = {{{states}}}  # initial states: their sizes (a reverse state's enters after step T)\n"
        f"CACHE = {{{cache}}}  # the dims of the input and of each state in forward's cache (beside each sweep's)\n"
    )


def _tables(model, groups):
    rows = []
    for k, group in enumerate(groups, start=1):
        side = tuple(seq.name for seq, _ in group.side)
        exposes = tuple((seq.name, str(seq.rows)) for seq in group.exposes)
        placement = group.placement and group.placement.name
        rows.append(
            f"    _Sweep(_sweep{k}_PASSES, reverse={group.reverse}, reads_input={group.reads_input}, side={side!r}, "
            f"exposes={exposes!r}, placement={placement!r}),"
        )
    (source,), (output, _) = model.inputs, model.outputs[0]
    target = model.concrete_loss().target
    data = {"xs": str(source.rows), "ys": str(target.rows), "outputs": str(output.rows)}
    labels = tuple(name for name, seq in (("xs", source), ("ys", target)) if seq.role == "label")
    return (
        f"_DATA = {data!r}  # the rows of a step of xs, ys and the outputs\n"
        f"_SPEC = _Spec(PARAMS, SIZES, SHAPES, STATES, CACHE, MEAN, TEACHER_FORCED, _DATA, labels={labels!r}, "
        f"output={output.name!r})\n"
        "_SWEEPS = _Sweeps(_SPEC, (\n" + "\n".join(rows) + f"\n), _sweep{len(groups)}_losses)\n"
    )
