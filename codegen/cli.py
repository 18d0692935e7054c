"""The `bptt` command: LaTeX derivations, code generation and gradient checks."""

import argparse
import os
import pathlib
import sys

import bptt.generated as generated
from bptt.derive.adjoint import NoRule
from bptt.derive.model import ModelError
from bptt.derive.models import ZOO, load, names

from . import check as checking
from .numpy_printer import PrintError
from .render import document, module_filename, module_source, write_atomic

GENERATED = pathlib.Path(generated.__file__).parent


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit status 2."""


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
    text = document(model, fmt)
    if args.output:
        folder = pathlib.Path(args.output).resolve().parent
        if not folder.is_dir():
            raise UsageError(f"-o {args.output}: the folder {str(folder)!r} does not exist")
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_codegen(args):
    models = [_model(spec) for spec in (args.models or names())]
    out = pathlib.Path(args.out) if args.out else GENERATED
    if not out.is_dir():
        raise UsageError(f"output folder {str(out)!r} does not exist")
    sources = {out / module_filename(model): module_source(model) for model in models}
    blocked = [str(path) for path in sources if path.exists() and not path.is_file()]
    if blocked:
        raise UsageError(f"cannot write {', '.join(blocked)}: not a regular file (nothing was written)")
    if args.check:
        stale = [p for p, text in sources.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"stale: {path} (run `bptt codegen` to regenerate)")
        return 1 if stale else 0
    for path, text in sources.items():
        write_atomic(path, text)
        print(f"wrote {path}")
    return 0


def _sizes(text, module):
    if text is None:
        return checking.default_sizes(module)
    sizes = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in module.SIZES or not value.isdigit() or int(value) < 1:
            raise UsageError(f"--sizes: expected NAME=N for {', '.join(module.SIZES)} with N >= 1, got {item!r}")
        sizes[name] = int(value)
    missing = [name for name in module.SIZES if name not in sizes]
    if missing:
        raise UsageError(f"--sizes: missing {', '.join(missing)} (expected all of {', '.join(module.SIZES)})")
    return sizes


def cmd_check(args):
    model = _model(args.model)
    module = checking.load_module(model, from_zoo=args.model in ZOO)
    sizes = _sizes(args.sizes, module)
    rows = checking.check(module, args.steps, args.batch, args.seed, args.dtype, sizes, args.truncate)
    shown = " ".join(f"{k}={v}" for k, v in sizes.items())
    mode = "full BPTT" if args.truncate is None else "truncate={}:{}".format(*args.truncate)
    print(f"{model.name}: {mode} T={args.steps} B={args.batch} seed={args.seed} dtype={args.dtype} {shown}")
    randomized = args.truncate is not None and args.truncate[0] == "random"
    print(checking.table(rows, "|bias| / 5 s.e." if randomized else "max rel. error"))
    failed = [row.name for row in rows if not row.ok]
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    elif randomized:
        print(f"the mean of {checking.RANDOM_SAMPLES} randomized estimates agrees with full BPTT")
    else:
        print(
            "all gradients agree with finite differences" + ("" if args.truncate is None else " of the truncated loss")
        )
    return 1 if failed else 0


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


def parser():
    top = argparse.ArgumentParser(
        prog="bptt",
        description="Derive backpropagation through time symbolically, print it as LaTeX, "
        "generate NumPy code for it and check that code against finite differences.",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub = commands.add_parser("models", help="list the models known, a line each")
    sub.set_defaults(run=cmd_models)

    model_help = "a model name (see `bptt models`) or a user's model as path/to/file.py:function"
    sub = commands.add_parser("latex", help="print a model's BPTT derivation as LaTeX or Markdown")
    sub.add_argument("model", help=model_help)
    sub.add_argument("-o", "--output", help="write to FILE instead of standard output")
    sub.add_argument("--format", choices=("tex", "md"), help="a standalone LaTeX document (default) or Markdown")
    sub.set_defaults(run=cmd_latex)

    sub = commands.add_parser("codegen", help="regenerate generated/<model>.py")
    sub.add_argument("models", nargs="*", metavar="MODEL", help=f"{model_help} (default: every zoo model)")
    sub.add_argument("--check", action="store_true", help="change nothing; exit 1 naming every stale file")
    sub.add_argument("--out", help="write into this folder instead of generated/")
    sub.set_defaults(run=cmd_codegen)

    sub = commands.add_parser("check", help="check a generated module against central finite differences")
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
        help="check truncated BPTT: window:K, chunk:K (against the truncated loss) or random:PI (unbiasedness)",
    )
    sub.set_defaults(run=cmd_check)
    return top


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:  # the reader stopped early (`bptt latex elman | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (UsageError, NoRule, PrintError) as error:  # bad input, or a model the tool cannot handle
        print(f"bptt {args.command}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a bug or an unreadable file: one line, unless debugging
        if os.environ.get("BPTT_DEBUG"):
            raise
        print(f"bptt {args.command}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


def run():
    """Console-script entry point."""
    sys.exit(main())
