"""The `bptt` command: LaTeX derivations, code generation and gradient checks."""

import itertools
import os
import pathlib
import shlex
import sys

import bptt.generated as generated
from bptt.app.analysis import analyze as analysis
from bptt.app.analysis import plots
from bptt.app.arguments import UsageError, parser
from bptt.app.bench import bench as benchmark
from bptt.app.bench import checkpoints as bench_checkpoints
from bptt.app.bench.process import Killed
from bptt.app.exercises import cmd_exercises
from bptt.app.files import OutputError, output_folder, output_target, writable_folder, write_atomic
from bptt.app.verify import check as checking
from bptt.app.verify import problem as instances
from bptt.app.verify.check_backend import Options, report
from bptt.codegen.backends import BACKENDS, MissingFramework, module_filename, reference, require
from bptt.derive.direction import forward_only
from bptt.derive.model import ModelError
from bptt.derive.models import ZOO, load, names
from bptt.derive.refusal import Refusal
from bptt.documents.document import UnknownSection, sections
from bptt.documents.render import figure_files, rendered

GENERATED = pathlib.Path(generated.__file__).parent
# A checkout holds pyproject.toml beside generated/; an installed bptt (site-packages) has none.
CHECKOUT = GENERATED.parent if (GENERATED.parent / "pyproject.toml").is_file() else None


def _model(spec):
    try:
        return load(spec)
    except ModelError as error:
        raise UsageError(str(error)) from error


def cmd_models(args):
    width = max(map(len, names())) + 2  # the longest name, then two spaces before the titles
    for name in names():
        model = ZOO[name]()
        print(f"{name:<{width}}{model.title}")
    return 0


def cmd_latex(args):
    model = _model(args.model)
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


def cmd_codegen(args):
    sources = {}
    backends = list(BACKENDS) if args.backend == "all" else [args.backend]
    for spec, backend in itertools.product(dict.fromkeys(args.models or names()), backends):
        model = _model(spec)
        path = _folder(args, from_zoo=spec in ZOO) / module_filename(model, backend)
        if path in sources:
            raise UsageError(f"two models would write {path} (nothing was written)")
        if model.spec and path.resolve() == pathlib.Path(model.spec.rpartition(":")[0]).resolve():
            raise UsageError(
                f"the module for {spec} would replace the model file itself, {path}: "
                "rename the file or the model, or give --out (nothing was written)"
            )
        sources[path] = BACKENDS[backend].module_source(model, standalone=args.standalone)
    for path in sources:
        if path.parent.is_dir():  # a folder still to be made holds nothing to refuse
            output_target(path)  # refuses folders, devices, FIFOs before anything is written
    if args.check:
        return _report(args, sources)
    for path, text in sources.items():
        path.parent.mkdir(exist_ok=True)  # --out DIR, made as mkdir makes it: its parent exists (_folder)
        write_atomic(path, text)
        print(f"wrote {path}")
    return 0


def _folder(args, from_zoo):
    """Where a module goes: --out (a folder, or one to make in an existing folder); else the checkout's generated/
    for a zoo model, the current folder for a user's.

    Installed without a checkout, only --check may use the installed generated/ (reading it); writing needs --out."""
    if args.out is not None:
        return output_folder(args.out, "--out")  # made when written (not by --check), if only its parent exists
    if from_zoo and args.standalone:
        raise UsageError(
            f"--standalone: {GENERATED} holds the zoo's modules, which import bptt.runtime; "
            "give --out DIR for standalone ones (nothing was written)"
        )
    if not from_zoo:
        folder = pathlib.Path()
    elif CHECKOUT or args.check:
        folder = GENERATED
    else:
        raise UsageError(
            f"bptt is installed without its source checkout, and codegen never writes into {GENERATED}: "
            "give --out DIR to regenerate the zoo there"
        )
    return folder


def _report(args, sources):
    """codegen --check: name every missing, stale and (for the whole zoo) unexpected module; 1 if any."""
    outdated = [path for path, text in sources.items() if not path.exists() or path.read_bytes() != text.encode()]
    for path in outdated:
        print(f"{'stale' if path.exists() else 'missing'}: {path}")
    if outdated:
        backend = [] if args.backend == reference().name else ["--backend", args.backend]
        command = ["bptt", "codegen", *args.models, *backend, *(["--out", args.out] if args.out else [])]
        print(f"run `{shlex.join(command)}` to regenerate")
    unexpected = [] if args.models else _unexpected(sources)
    for path in unexpected:
        print(f"unexpected: {path} (no zoo model writes it: delete it, or move it out of this folder)")
    return 1 if outdated or unexpected else 0


def _unexpected(sources):
    """The *.py files (but __init__.py) in the output folders that no zoo model writes, in any backend."""
    folders = {path.parent for path in sources}
    written = {ZOO[name]().name for name in names()}
    expected = {folder / b.filename(name) for folder in folders for name in written for b in BACKENDS.values()}
    found = {path for folder in folders for path in folder.glob("*.py") if path.name != "__init__.py"}
    return sorted(found - expected)


def _sizes(text, module):
    if text is None:
        return instances.default_sizes(module)
    sizes = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in module.SIZES or not value.isdigit() or int(value) < 1:
            raise UsageError(f"--sizes: expected NAME=N for {', '.join(module.SIZES)} with N >= 1, got {item!r}")
        if name in sizes:
            raise UsageError(f"--sizes: {name} is given twice ({name}={sizes[name]} and {item}); give each size once")
        sizes[name] = int(value)
    missing = [name for name in module.SIZES if name not in sizes]
    if missing:
        raise UsageError(f"--sizes: missing {', '.join(missing)} (expected all of {', '.join(module.SIZES)})")
    return sizes


def cmd_check(args):
    try:  # before any work: a long T is refused in a time independent of T
        checking.require_enumerable(args.steps, args.truncate)
    except checking.TooManyPatterns as error:
        raise UsageError(f"--steps {args.steps} with --truncate {args.truncate.text()}: {error}") from error
    model = _model(args.model)
    backends = list(BACKENDS) if args.backend == "all" else [args.backend]
    batch = _padded_batch(args)
    for backend in backends:
        require(backend)  # a missing framework: one line, before any work
    from_zoo = args.model in ZOO
    numpy_module = checking.load_module(model, from_zoo)
    try:  # each group of steps of a model with reverse-time states draws its own weights
        checking.require_enumerable(args.steps, args.truncate, checking.group_count(numpy_module))
    except checking.TooManyPatterns as error:
        raise UsageError(f"--steps {args.steps} with --truncate {args.truncate.text()}: {error}") from error
    sizes = _sizes(args.sizes, numpy_module)
    options = Options(args.steps, batch, args.seed, args.dtype, sizes, args.truncate, args.lengths)
    passed = True
    for backend in backends:
        module = numpy_module if BACKENDS[backend].reference else checking.load_module(model, from_zoo, backend)
        lines, ok = report(model, backend, module, numpy_module, options)  # NonFiniteForward is left to main
        print("\n".join(lines) + ("\n" if backend != backends[-1] else ""))
        passed = passed and ok
    return 0 if passed else 1


def _padded_batch(args):
    """check's and bench's batch size: --lengths' count of lengths if given (each at most --steps), else --batch."""
    if args.lengths is None:
        return args.batch
    if args.lengths.above(args.steps):
        raise UsageError(args.lengths.above(args.steps))
    return args.lengths.batch(args.batch)


def cmd_analyze(args):
    model = _model(args.model)
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
    model = _model(args.model)
    forward_only(model, "bptt bench")
    module = checking.load_module(model, from_zoo=args.model in ZOO)
    sizes = _sizes(args.sizes, module) if args.sizes else {name: 32 for name in module.SIZES}
    if not BACKENDS[args.backend].reference:
        require(args.backend)
        module = checking.load_module(model, from_zoo=args.model in ZOO, backend=args.backend)  # missing: one line
    peers = args.peers or list(benchmark.default_peers(args.backend))
    spec = dict(model=args.model, sizes=sizes, steps=args.steps, batch=_padded_batch(args), dtypes=args.dtype)
    spec.update(checkpoints_spec(args, module, sizes))
    if args.lengths is not None:
        if args.peers or args.checkpoints is not None:
            raise UsageError("--lengths times the module with lengths= against without: no --peers, no --checkpoints")
        spec["lengths"] = args.lengths.text()
    return benchmark.launch(dict(spec, repeats=args.repeats, peers=peers, backend=args.backend))


def checkpoints_spec(args, module, sizes):
    """--checkpoints and -o of bench: the budgets (a bad one, or one too small for a step of this problem,
    is a usage error) and the output folder (one that cannot be written: an OS error), before measuring."""
    if args.checkpoints is None:
        if args.output is not None:
            raise UsageError("-o: bench writes files only with --checkpoints")
        return {}
    try:
        budgets = bench_checkpoints.parse(args.checkpoints)
        bench_checkpoints.require_a_step(module, sizes, args.batch, args.dtype, budgets)
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


def guarded(command, work):
    """work()'s exit status, or an error's, reported on one line as `bptt COMMAND: error: ...` (bench's
    measuring process reports its errors so too)."""
    try:
        return work()
    except KeyboardInterrupt:  # Ctrl-C: stop quietly, with the shell's status for SIGINT
        return 130
    except BrokenPipeError:  # the reader stopped early (`bptt latex elman | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (
        UsageError,
        ModelError,
        OutputError,
        Refusal,
        MissingFramework,
    ) as error:  # bad input, or a model the tool cannot handle
        return _failed(command, error, 2)
    except instances.NonFiniteForward as error:  # check: the forward pass overflowed
        return _failed(command, error, 4)
    except Killed as error:  # bench: the measuring process was killed (out of memory, or by a user)
        return _failed(command, error, 3)
    except Exception as error:  # an OS error or a bug: one line, unless debugging
        if os.environ.get("BPTT_DEBUG"):
            raise
        return _failed(command, _describe(error), 3)


def _describe(error):
    """An OS or internal error in words: `path: Permission denied`, `out of memory ...`, or `internal error: ...`."""
    if isinstance(error, OSError) and error.strerror and error.filename:
        return f"{error.filename}: {error.strerror}"
    if isinstance(error, MemoryError):
        return "out of memory: the sizes, steps or batch asked for need more memory than this machine gives"
    named = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return named if isinstance(error, OSError) else f"internal error: {named} (BPTT_DEBUG=1 shows the traceback)"


def _failed(command, error, status):
    """Report error on one line of stderr; the exit status."""
    print(f"bptt {command}: error: {' '.join(str(error).split())}", file=sys.stderr)
    return status


def run():
    """The console scripts of earlier installs call this (now: start.run, which also covers loading this module)."""
    sys.exit(main())
