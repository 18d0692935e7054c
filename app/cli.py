"""The `bptt` command: LaTeX derivations, code generation and gradient checks.

A command imports its own machinery (analysis, bench, check, exercises, code generation) when it runs, so that
`bptt latex` does not start by loading the others'."""

import argparse
import pathlib
import sys

from bptt.app import memory
from bptt.app.arguments import BENCH_BATCH, CHECK_BATCH, LARGEST, UsageError, load_model, parser, positive, shown
from bptt.app.files import output_target, writable_folder, write_atomic
from bptt.app.guard import guarded
from bptt.codegen.backends import BACKENDS, require, require_installed
from bptt.derive.direction import forward_only
from bptt.derive.models import ZOO, load, names
from bptt.documents.document import UnknownSection, sections
from bptt.documents.render import figure_files, rendered


def cmd_models(args):
    width = max(map(len, names())) + 2  # the longest name, then two spaces before the titles
    for name in names():
        model = load(name)
        print(f"{name:<{width}}{model.title}")
    return 0


def cmd_latex(args):
    model = load_model(args.model)
    fmt = args.format or ("md" if args.output and args.output.endswith(".md") else "tex")
    if args.output is not None:
        output_target(args.output)  # an empty name, a device, FIFO or folder is refused before any work
    only = _section_names(args.sections)
    try:
        chosen = sections(model, only)
    except UnknownSection as error:
        raise UsageError(f"--sections: {error}") from error
    if args.output is None:
        sys.stdout.write(rendered(model, chosen, fmt, only))
        return 0
    # Markdown written to a file links its figures as SVG files beside it: GitHub's renderer drops inline SVG.
    stem = pathlib.Path(args.output).stem if fmt == "md" else None
    files = {} if stem is None else figure_files(chosen, stem)
    folder = pathlib.Path(args.output).parent
    for name in files:
        output_target(folder / name)
    for name, svg in files.items():
        write_atomic(folder / name, svg)
    write_atomic(args.output, rendered(model, chosen, fmt, only, stem))
    return 0


def _section_names(text):
    """--sections backward,parameters: the names, or None for the whole document."""
    if text is None:
        return None
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise UsageError(
            f"--sections: an empty section name in {text!r}; give names separated by commas, e.g. backward,parameters"
        )
    return names


def _sizes(text, module):
    from bptt.app.verify import problem as instances

    if text is None:
        return instances.default_sizes(module)
    sizes = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        try:
            value = positive(value) if name in module.SIZES else None
        except argparse.ArgumentTypeError:
            value = None
        if value is None:
            raise UsageError(
                f"--sizes: expected NAME=N for {', '.join(module.SIZES)} with N from 1 to {LARGEST}, got {shown(item)}"
            )
        if name in sizes:
            raise UsageError(f"--sizes: {name} is given twice ({name}={sizes[name]} and {item}); give each size once")
        sizes[name] = value
    missing = [name for name in module.SIZES if name not in sizes]
    if missing:
        raise UsageError(f"--sizes: missing {', '.join(missing)} (expected all of {', '.join(module.SIZES)})")
    return sizes


def _enumerable(args, *groups):
    """UsageError in one line if random truncation's keep patterns over --steps (and the groups) are too many."""
    from bptt.app.verify import check as checking

    try:
        checking.require_enumerable(args.steps, args.truncate, *groups)
    except checking.TooManyPatterns as error:
        raise UsageError(f"--steps {args.steps} with --truncate {args.truncate.text()}: {error}") from error


def cmd_check(args):
    from bptt.app.verify import check as checking
    from bptt.app.verify.check_backend import Options, report
    from bptt.app.verify.patterns import group_count

    _enumerable(args)  # before any work: a long T is refused in a time independent of T
    model = load_model(args.model)
    backends = list(BACKENDS) if args.backend == "all" else [args.backend]
    batch = _padded_batch(args, CHECK_BATCH)
    for backend in backends:
        require(backend)  # a missing framework: one line, before any work
    from_zoo = args.model in ZOO
    numpy_module = checking.load_module(model, from_zoo)
    _enumerable(args, group_count(numpy_module))  # each group of a model with reverse-time states draws
    sizes = _sizes(args.sizes, numpy_module)
    memory.require_room(numpy_module, args.steps, batch, sizes, 8, "the check")
    options = Options(args.steps, batch, args.seed, args.dtype, sizes, args.truncate, args.lengths)
    passed = True
    for backend in backends:
        module = numpy_module if BACKENDS[backend].reference else checking.load_module(model, from_zoo, backend)
        lines, ok = report(model, backend, module, numpy_module, options)  # NonFiniteForward is left to main
        print("\n".join(lines) + ("\n" if backend != backends[-1] else ""))
        passed = passed and ok
    return 0 if passed else 1


def _padded_batch(args, default):
    """check's and bench's batch size: --lengths' count of lengths if given (each at most --steps; --batch, if given
    too, the same count), else --batch, else default."""
    if args.lengths is None:
        return args.batch or default
    if args.lengths.above(args.steps):
        raise UsageError(args.lengths.above(args.steps))
    if args.lengths.disagrees(args.batch):
        raise UsageError(args.lengths.disagrees(args.batch))
    return args.lengths.batch(args.batch or default)


def cmd_analyze(args):
    from bptt.app.analysis import analyze as analysis
    from bptt.app.analysis import plots

    model = load_model(args.model)
    if args.output is not None and writable_folder(args.output, "-o").is_dir():
        plots.targets(
            args.output, analysis.table_names(model, args.scale)
        )  # the files it would replace: regular files, or none
    try:
        if args.output is not None:
            plots.require()  # before the measurements, not after
        bar = plots.ProgressBar(f"bptt analyze {model.name}", sys.stderr) if sys.stderr.isatty() else None
        result = analysis.analyze(model, args.steps, args.seed, args.radius, args.g_max, args.scale, progress=bar)
    except (plots.MissingMatplotlib, analysis.NoFlow) as error:
        raise UsageError(str(error)) from error
    if args.csv:
        print("\n".join(f"# {table.name}: {table.title}\n{table.csv()}" for table in result.tables), end="")
    else:
        shown = ",".join(f"{r:g}" for r in result.radii)
        scaled = f", input weights and biases times {result.scale:g}" if result.scale != 1 else ""
        print(
            f"{model.name}: T={args.steps} seed={args.seed} radii={shown}, one random sequence, "
            f"every size {analysis.SIZE}{scaled}"
        )
        print("\n\n".join(table.text() for table in result.tables))
    for path in plots.write(result, args.output) if args.output is not None else ():
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_bench(args):
    from bptt.app.bench import bench as benchmark
    from bptt.app.verify import check as checking

    model = load_model(args.model)
    forward_only(model, "bptt bench")
    module = checking.load_module(model, from_zoo=args.model in ZOO)
    sizes = _sizes(args.sizes, module) if args.sizes else {name: 32 for name in module.SIZES}
    if not BACKENDS[args.backend].reference and args.checkpoints is not None:  # its budgets weighed on its module
        require(args.backend)
        module = checking.load_module(model, from_zoo=args.model in ZOO, backend=args.backend)  # missing: one line
    elif not BACKENDS[args.backend].reference:  # the measuring child imports the framework, the parent need not
        require_installed(args.backend)
        checking.require_module(model, from_zoo=args.model in ZOO, backend=args.backend)  # missing: one line
    memory.require_room(module, args.steps, _padded_batch(args, BENCH_BATCH), sizes, 8, "the benchmark")
    peers = args.peers or list(benchmark.default_peers(args.backend))
    spec = dict(
        model=args.model, sizes=sizes, steps=args.steps, batch=_padded_batch(args, BENCH_BATCH), dtypes=args.dtype
    )
    spec.update(checkpoints_spec(args, module, sizes))
    if args.lengths is not None:
        if args.peers or args.checkpoints is not None:
            raise UsageError("--lengths times the module with lengths= against without: no --peers, no --checkpoints")
        spec["lengths"] = args.lengths.text()
    return benchmark.launch(dict(spec, repeats=args.repeats, peers=peers, backend=args.backend))


def checkpoints_spec(args, module, sizes):
    """--checkpoints and -o of bench: the budgets (a bad one, or one too small for a step of this problem,
    is a usage error) and the output folder (one that cannot be written: an OS error), before measuring."""
    from bptt.app.analysis import plots
    from bptt.app.bench import checkpoints as bench_checkpoints

    if args.checkpoints is None:
        if args.output is not None:
            raise UsageError("-o: bench writes files only with --checkpoints")
        return {}
    try:
        budgets = bench_checkpoints.parse(args.checkpoints)
        bench_checkpoints.require_a_step(module, sizes, args.batch or BENCH_BATCH, args.dtype, budgets)
    except ValueError as error:
        raise UsageError(f"--checkpoints: {error}") from error
    if args.output is not None:
        if writable_folder(args.output, "-o").is_dir():
            plots.targets(args.output, [bench_checkpoints.NAME])  # the files it would replace
        try:
            plots.require()
        except plots.MissingMatplotlib as error:
            raise UsageError(str(error)) from error
    return {"checkpoints": budgets, "output": args.output}


def cmd_codegen(args):
    from bptt.app.generate import cmd_codegen as codegen

    return codegen(args)


def cmd_exercises(args):
    from bptt.app.exercises import cmd_exercises as exercises

    return exercises(args)


COMMANDS = {
    "models": cmd_models,
    "latex": cmd_latex,
    "codegen": cmd_codegen,
    "check": cmd_check,
    "analyze": cmd_analyze,
    "bench": cmd_bench,
    "exercises": cmd_exercises,
}


def main(argv=None):
    try:
        args = parser(COMMANDS).parse_args(argv)
    except KeyboardInterrupt:
        return 130
    return guarded(args.command, lambda: args.run(args))


def run():
    """The console scripts of earlier installs call this (now: start.run, which also covers loading this module)."""
    sys.exit(main())
