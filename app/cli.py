"""The `bptt` command: LaTeX derivations, code generation and gradient checks."""

import argparse
import itertools
import os
import pathlib
import shlex
import sys

import bptt.generated as generated
from bptt.app import analyze as analysis
from bptt.app import check as checking
from bptt.app import plots
from bptt.app.bench import bench as benchmark
from bptt.app.bench import checkpoints as bench_checkpoints
from bptt.app.check_backend import Options, report
from bptt.app.files import OutputError, output_target, write_atomic
from bptt.codegen.backends import BACKENDS, MissingFramework, module_filename, require
from bptt.codegen.printing.printer import PrintError
from bptt.derive.adjoint import NoRule
from bptt.derive.model import ModelError
from bptt.derive.models import ZOO, load, names
from bptt.documents.render import document

GENERATED = pathlib.Path(generated.__file__).parent
# A checkout holds pyproject.toml beside generated/; an installed bptt (site-packages) has none.
CHECKOUT = GENERATED.parent if (GENERATED.parent / "pyproject.toml").is_file() else None

EXIT_STATUS = """exit status:
  0  done; every check passed
  1  a check failed: a gradient disagrees (check), a module is missing, stale or unexpected (codegen --check)
  2  usage error: bad arguments, an unknown or malformed model, an output that is not a regular file
  3  operating-system or internal error: a file that cannot be read or written, out of memory, a bug
  4  check: the forward pass is not finite (it overflowed), so no gradient can be compared
130  interrupted (Ctrl-C), quietly
"""


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, `bptt check: error: ...`, exit status 2 (subcommands included)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")


def _model(spec):
    try:
        return load(spec)
    except ModelError as error:
        raise UsageError(str(error)) from error


def cmd_models(args):
    for name in names():
        model = ZOO[name]()
        print(f"{name:<14}{model.title}")
    return 0


def cmd_latex(args):
    model = _model(args.model)
    fmt = args.format or ("md" if args.output and args.output.endswith(".md") else "tex")
    if args.output is not None:
        output_target(args.output)  # an empty name, a device, FIFO or folder is refused before any work
    text = document(model, fmt)
    if args.output is not None:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


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
        sources[path] = BACKENDS[backend].module_source(model)
    for path in sources:
        output_target(path)  # refuses folders, devices, FIFOs before anything is written
    if args.check:
        return _report(args, sources)
    for path, text in sources.items():
        write_atomic(path, text)
        print(f"wrote {path}")
    return 0


def _folder(args, from_zoo):
    """Where a module goes: --out; else the checkout's generated/ for a zoo model, the current folder for a user's.

    Installed without a checkout, only --check may use the installed generated/ (reading it); writing needs --out."""
    if args.out == "":
        raise UsageError("--out: the folder name is empty")
    if args.out:
        folder = pathlib.Path(args.out)
    elif not from_zoo:
        folder = pathlib.Path()
    elif CHECKOUT or args.check:
        folder = GENERATED
    else:
        raise UsageError(
            f"bptt is installed without its source checkout, and codegen never writes into {GENERATED}: "
            "give --out DIR to regenerate the zoo there"
        )
    if not folder.is_dir():
        raise UsageError(f"output folder {str(folder)!r} does not exist")
    return folder


def _report(args, sources):
    """codegen --check: name every missing, stale and (for the whole zoo) unexpected module; 1 if any."""
    outdated = [path for path, text in sources.items() if not path.exists() or path.read_bytes() != text.encode()]
    for path in outdated:
        print(f"{'stale' if path.exists() else 'missing'}: {path}")
    if outdated:
        backend = [] if args.backend == "numpy" else ["--backend", args.backend]
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
        return checking.default_sizes(module)
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
    model = _model(args.model)
    backends = list(BACKENDS) if args.backend == "all" else [args.backend]
    for backend in backends:
        require(backend)  # a missing framework: one line, before any work
    from_zoo = args.model in ZOO
    reference = checking.load_module(model, from_zoo)
    options = Options(args.steps, args.batch, args.seed, args.dtype, _sizes(args.sizes, reference), args.truncate)
    passed = True
    for backend in backends:
        module = reference if backend == "numpy" else checking.load_module(model, from_zoo, backend)
        try:  # checking.NonFiniteForward (the forward pass overflowed) is left to main
            lines, ok = report(model, backend, module, reference, options)
        except checking.TooManyPatterns as error:
            raise UsageError(f"--steps {args.steps} with --truncate random:{args.truncate[1]}: {error}") from error
        print("\n".join(lines) + ("\n" if backend != backends[-1] else ""))
        passed = passed and ok
    return 0 if passed else 1


def cmd_analyze(args):
    model = _model(args.model)
    if args.output is not None:
        if not args.output:
            raise UsageError("-o: the output folder name is empty")
        if not pathlib.Path(args.output).is_dir():
            raise UsageError(f"-o: output folder {args.output!r} does not exist or is not a folder")
        plots.targets(args.output, analysis.TABLES)  # the files it would replace: regular files, or none
    try:
        if args.output is not None:
            plots.require()  # before the measurements, not after
        bar = plots.ProgressBar(f"bptt analyze {model.name}", sys.stderr) if sys.stderr.isatty() else None
        result = analysis.analyze(model, args.steps, args.seed, args.radius, progress=bar)
    except (plots.MissingMatplotlib, analysis.NoFlow) as error:
        raise UsageError(str(error)) from error
    if args.csv:
        print("\n".join(f"# {table.name}: {table.title}\n{table.csv()}" for table in result.tables), end="")
    else:
        shown = ",".join(f"{r:g}" for r in result.radii)
        print(
            f"{model.name}: T={args.steps} seed={args.seed} radii={shown}, one random sequence, every size {analysis.SIZE}"
        )
        print("\n\n".join(table.text() for table in result.tables))
    for path in plots.write(result, args.output) if args.output is not None else ():
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_bench(args):
    model = _model(args.model)
    module = checking.load_module(model, from_zoo=args.model in ZOO)
    sizes = _sizes(args.sizes, module) if args.sizes else {name: 32 for name in module.SIZES}
    if args.backend != "numpy":
        require(args.backend)
        checking.load_module(model, from_zoo=args.model in ZOO, backend=args.backend)  # missing: one line, here
    peers = args.peers or list(benchmark.BACKEND_PEERS[args.backend])
    spec = dict(model=args.model, sizes=sizes, steps=args.steps, batch=args.batch, dtypes=args.dtype)
    spec.update(checkpoints_spec(args))
    return benchmark.launch(dict(spec, repeats=args.repeats, peers=peers, backend=args.backend))


def checkpoints_spec(args):
    """--checkpoints and -o of bench: the budgets (a bad one is a usage error) and the output folder."""
    if args.checkpoints is None:
        if args.output is not None:
            raise UsageError("-o: bench writes files only with --checkpoints")
        return {}
    try:
        budgets = bench_checkpoints.parse(args.checkpoints)
    except ValueError as error:
        raise UsageError(f"--checkpoints: {error}") from error
    if args.output is not None:
        if not args.output or not pathlib.Path(args.output).is_dir():
            raise UsageError(f"-o: output folder {args.output!r} does not exist or is not a folder")
        plots.targets(args.output, [bench_checkpoints.NAME])
        try:
            plots.require()
        except plots.MissingMatplotlib as error:
            raise UsageError(str(error)) from error
    return {"checkpoints": budgets, "output": args.output}


def _choices(allowed, what):
    """An argparse type: a comma-separated list of some of `allowed`."""

    def parse(text):
        items = [item for item in text.split(",") if item]
        if not items or any(item not in allowed for item in items):
            raise argparse.ArgumentTypeError(
                f"expected {what} from {', '.join(allowed)} separated by commas; got {text!r}"
            )
        return list(dict.fromkeys(items))

    return parse


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _truncate(text):
    mode, _, value = text.partition(":")
    try:
        if mode in ("window", "chunk") and int(value) >= 1:
            return mode, int(value)
        if mode == "random" and 0 < float(value) <= 1:
            return mode, float(value)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(
        f"expected window:K or chunk:K with K >= 1, or random:PI with 0 < PI <= 1; got {text!r}"
    )


def _seed(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def _radii(text):
    try:
        radii = tuple(float(item) for item in text.split(","))
    except ValueError:
        radii = ()
    if not radii or not all(0 < r < float("inf") for r in radii):
        raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, e.g. 0.5,1,1.5; got {text!r}")
    return radii


def parser():
    documented = dict(epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    top = Parser(
        prog="bptt",
        description="Derive backpropagation through time symbolically, print it as LaTeX,\n"
        "generate NumPy code for it and check that code against finite differences.",
        **documented,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub = commands.add_parser("models", help="list the models known, a line each", **documented)
    sub.set_defaults(run=cmd_models)

    model_help = "a model name (see `bptt models`) or a user's model as path/to/file.py:function"
    sub = commands.add_parser("latex", help="print a model's BPTT derivation as LaTeX or Markdown", **documented)
    sub.add_argument("model", help=model_help)
    sub.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    sub.add_argument("--format", choices=("tex", "md"), help="a standalone LaTeX document (default) or Markdown")
    sub.set_defaults(run=cmd_latex)

    sub = commands.add_parser("codegen", help="regenerate generated/<model>.py", **documented)
    sub.add_argument("models", nargs="*", metavar="MODEL", help=f"{model_help} (default: every zoo model)")
    sub.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 naming every missing or stale module (and, checking the whole zoo, "
        "every unexpected *.py in the folder)",
    )
    sub.add_argument(
        "--out",
        metavar="DIR",
        help="write into DIR (default: the checkout's generated/ for a zoo model, the current folder for a user's)",
    )
    sub.add_argument(
        "--backend",
        choices=(*BACKENDS, "all"),
        default="numpy",
        help="the framework the module runs on: <model>.py for numpy (default), <model>_torch.py, <model>_jax.py; "
        "all: every one",
    )
    sub.set_defaults(run=cmd_codegen)

    sub = commands.add_parser("check", help="check a generated module against central finite differences", **documented)
    sub.add_argument("model", help=model_help)
    sub.add_argument("--steps", type=_positive, default=5, metavar="T", help="sequence length (default 5)")
    sub.add_argument("--batch", type=_positive, default=3, metavar="B", help="batch size (default 3)")
    sub.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed (default 0)")
    sub.add_argument("--dtype", choices=("float64", "float32"), default="float64", help="dtype of the analytic pass")
    sub.add_argument("--sizes", metavar="d=3,h=4,...", help="model sizes (default 3, 4, 5, ... in order)")
    sub.add_argument(
        "--truncate",
        type=_truncate,
        metavar="MODE:K",
        help="check truncated BPTT: window:K, chunk:K (against the truncated loss) or random:PI (exact expectation over all 2^T keep patterns, T <= 12)",
    )
    sub.add_argument(
        "--backend",
        choices=(*BACKENDS, "all"),
        default="numpy",
        help="the module checked (default numpy); torch and jax are also compared with the NumPy module; all: each",
    )
    sub.set_defaults(run=cmd_check)

    sub = commands.add_parser("analyze", help="measure and plot gradient flow through time", **documented)
    sub.add_argument("model", help=model_help)
    sub.add_argument(
        "--steps",
        type=_positive,
        default=analysis.STEPS,
        metavar="T",
        help=f"sequence length (default {analysis.STEPS})",
    )
    sub.add_argument("--seed", type=_seed, default=0, metavar="S", help="random seed (default 0)")
    sub.add_argument(
        "--radius",
        type=_radii,
        default=analysis.RADII,
        metavar="r1,r2,...",
        help="spectral radii to scale the recurrent weights to (default {})".format(",".join(map(str, analysis.RADII))),
    )
    sub.add_argument(
        "-o", "--output", metavar="DIR", help="write a PNG plot and a CSV file per table into DIR (needs bptt[plots])"
    )
    sub.add_argument("--csv", action="store_true", help="print the tables as CSV, each after a line '# name: title'")
    sub.set_defaults(run=cmd_analyze)
    sub = commands.add_parser(
        "bench", help="time the generated module against NumPy, PyTorch and JAX peers on one core", **documented
    )
    sub.add_argument("model", help=model_help)
    sub.add_argument("--sizes", metavar="d=28,h=32,...", help="model sizes (default 32 each)")
    sub.add_argument("--steps", type=_positive, default=35, metavar="T", help="sequence length (default 35)")
    sub.add_argument("--batch", type=_positive, default=32, metavar="B", help="batch size (default 32)")
    sub.add_argument(
        "--dtype",
        type=_choices(("float64", "float32"), "dtypes"),
        default=["float64", "float32"],
        help="dtypes (default both)",
    )
    sub.add_argument(
        "--repeats", type=_positive, default=7, metavar="R", help="timed rounds, median reported (default 7)"
    )
    sub.add_argument(
        "--peers",
        type=_choices(("numpy", *benchmark.PEERS), "peers"),
        help="peers (default: naive, hand, torch, jax; with --backend torch: numpy, torch; jax: numpy, jax)",
    )
    sub.add_argument(
        "--backend",
        choices=tuple(BACKENDS),
        default="numpy",
        help="time the module generated for this framework (default numpy) against that framework's own",
    )
    sub.add_argument(
        "--checkpoints",
        metavar="s1,s2,...",
        help="time loss_and_grads in bounded memory with each budget (slots, or bytes such as 32MiB) against full BPTT",
    )
    sub.add_argument(
        "-o", "--output", metavar="DIR", help="with --checkpoints: write checkpoints.png and .csv into DIR (bptt[plots])"
    )
    sub.set_defaults(run=cmd_bench)
    return top


def main(argv=None):
    try:
        args = parser().parse_args(argv)
    except KeyboardInterrupt:
        return 130
    try:
        return args.run(args)
    except KeyboardInterrupt:  # Ctrl-C: stop quietly, with the shell's status for SIGINT
        return 130
    except BrokenPipeError:  # the reader stopped early (`bptt latex elman | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (
        UsageError,
        ModelError,
        OutputError,
        NoRule,
        PrintError,
        MissingFramework,
    ) as error:  # bad input, or a model the tool cannot handle
        return _failed(args, error, 2)
    except checking.NonFiniteForward as error:  # check: the forward pass overflowed
        return _failed(args, error, 4)
    except Exception as error:  # an OS error or a bug: one line, unless debugging
        if os.environ.get("BPTT_DEBUG"):
            raise
        return _failed(args, _describe(error), 3)


def _describe(error):
    """An OS or internal error in words: `path: Permission denied`, or `internal error: MemoryError: ...`."""
    if isinstance(error, OSError) and error.strerror and error.filename:
        return f"{error.filename}: {error.strerror}"
    named = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return named if isinstance(error, OSError) else f"internal error: {named} (BPTT_DEBUG=1 shows the traceback)"


def _failed(args, error, status):
    """Report error on one line of stderr; the exit status."""
    print(f"bptt {args.command}: error: {' '.join(str(error).split())}", file=sys.stderr)
    return status


def run():
    """The console scripts of earlier installs call this (now: start.run, which also covers loading this module)."""
    sys.exit(main())
