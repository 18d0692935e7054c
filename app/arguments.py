"""The `bptt` command's arguments: the parser, its value types and the exit statuses it documents."""

import argparse
import re

from bptt.app.analysis import defaults as analysis
from bptt.app.guard import UsageError
from bptt.codegen.backends import BACKENDS, reference
from bptt.derive.model import ModelError
from bptt.derive.models import load
from bptt.documents.document import NAMES as SECTIONS
from bptt.runtime.options import Lengths, Truncation

EXIT_STATUS = """exit status:
  0  done; every check passed
  1  a check failed: a gradient disagrees (check), a module is missing, stale or unexpected (codegen --check)
  2  usage error: bad arguments (sizes beyond memory), an unknown or malformed model, an output not a regular file
  3  operating-system or internal error: a file that cannot be read or written, out of memory, a bug
  4  check: the forward pass is not finite (it overflowed), so no gradient can be compared
130  interrupted (Ctrl-C), quietly
"""
LARGEST = 10**9 - 1  # the largest T, B, size or count an option takes (nine digits); app/memory.py bounds them further
LARGEST_SEED = 2**64 - 1  # NumPy's generators take larger ones, no more random
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")  # what int() reads, in ASCII digits
CHECK_BATCH, BENCH_BATCH = 3, 32  # --batch when not given (nor --lengths 5,3,1, whose count it is then)


def load_model(spec):
    """The model a command names (a zoo name or path/to/file.py:function); one that cannot be loaded a usage error."""
    try:
        return load(spec)
    except ModelError as error:
        raise UsageError(str(error)) from error


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, `bptt check: error: ...`, exit status 2 (subcommands included)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")


def _peers(text):
    """bench's --peers: the reference backend and the bench's peers (loaded with the bench, when it runs)."""
    from bptt.app.bench.bench import PEERS

    return choices((reference().name, *PEERS), "peers")(text)


def choices(allowed, what):
    """An argparse type: a comma-separated list of some of `allowed`."""

    def parse(text):
        items = [item for item in text.split(",") if item]
        if not items or any(item not in allowed for item in items):
            raise argparse.ArgumentTypeError(
                f"expected {what} from {', '.join(allowed)} separated by commas; got {text!r}"
            )
        return list(dict.fromkeys(items))

    return parse


def positive(text):
    return _integer(text, 1, LARGEST, "a positive integer")


def truncate(text):
    try:
        return Truncation.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def lengths(text):
    try:
        return Lengths.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def seed(text):
    return _integer(text, 0, LARGEST_SEED, "a non-negative integer")


def _integer(text, low, high, expected):
    """int(text) if it is an integer from low to high, else ArgumentTypeError in one line; a text of more digits than
    high has is refused unread (no time in proportion to the number typed)."""
    written = _INTEGER.fullmatch(text) is not None
    digits = text.strip().lstrip("+-").lstrip("0") or "0"  # leading zeros say nothing of the size
    value = (-1 if "-" in text else 1) * int(digits) if written and len(digits) <= len(str(high)) else None
    if value is not None and low <= value <= high:
        return value
    above = written and (value is None or value > high)
    raise argparse.ArgumentTypeError(f"expected {expected}{f' of at most {high}' if above else ''}, got {shown(text)}")


def shown(text):
    """The user's text in a message: whole if short, else its start and its length."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"


def positive_number(text):
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def radii(text):
    try:
        radii = tuple(float(item) for item in text.split(","))
    except ValueError:
        radii = ()
    if not radii or not all(0 < r < float("inf") for r in radii):
        raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, e.g. 0.5,1,1.5; got {text!r}")
    return radii


def parser(runs):
    """The argument parser; runs: {command name: the function that runs it}."""
    documented = dict(epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    top = Parser(
        prog="bptt",
        description="Derive backpropagation through time symbolically, print it as LaTeX,\n"
        "generate NumPy code for it and check that code against finite differences.",
        **documented,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub = commands.add_parser("models", help="list the models known, a line each", **documented)
    sub.set_defaults(run=runs["models"])

    model_help = "a model name (see `bptt models`) or a user's model as path/to/file.py:function"
    sub = commands.add_parser("latex", help="print a model's BPTT derivation as LaTeX or Markdown", **documented)
    sub.add_argument("model", help=model_help)
    sub.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    sub.add_argument("--format", choices=("tex", "md"), help="a standalone LaTeX document (default) or Markdown")
    sub.add_argument(
        "--sections",
        metavar="NAME,...",
        help="only these sections, in the document's order (e.g. backward for the backward pass alone): "
        + ", ".join(SECTIONS),
    )
    sub.set_defaults(run=runs["latex"])

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
        "--standalone",
        action="store_true",
        help="a module that carries the runtime parts it calls, importing only its framework (default: it imports "
        "them from bptt.runtime); a zoo model's needs --out DIR",
    )
    sub.add_argument(
        "--backend",
        choices=(*BACKENDS, "all"),
        default=reference().name,
        help="the framework the module runs on: <model>.py for numpy (default), <model>_torch.py, <model>_jax.py; "
        "all: every one",
    )
    sub.set_defaults(run=runs["codegen"])

    sub = commands.add_parser("check", help="check a generated module against central finite differences", **documented)
    sub.add_argument("model", help=model_help)
    sub.add_argument("--steps", type=positive, default=5, metavar="T", help="sequence length (default 5)")
    sub.add_argument(
        "--batch",
        type=positive,
        metavar="B",
        help=f"batch size (default {CHECK_BATCH}; with --lengths 5,3,1: their count)",
    )
    sub.add_argument("--seed", type=seed, default=0, metavar="S", help="random seed (default 0)")
    sub.add_argument("--dtype", choices=("float64", "float32"), default="float64", help="dtype of the analytic pass")
    sub.add_argument("--sizes", metavar="d=3,h=4,...", help="model sizes (default 3, 4, 5, ... in order)")
    sub.add_argument(
        "--truncate",
        type=truncate,
        metavar="MODE:K",
        help="check truncated BPTT: window:K, chunk:K (against the truncated loss) "
        "or random:PI (exact expectation over all 2^T keep patterns, T <= 12)",
    )
    sub.add_argument(
        "--lengths",
        type=lengths,
        metavar="5,3,1",
        help="check a right-padded batch (lengths=): each sequence's own steps, at most T, one per sequence (the "
        "batch's size), or random: drawn from 1..T for each of --batch sequences",
    )
    sub.add_argument(
        "--backend",
        choices=(*BACKENDS, "all"),
        default=reference().name,
        help="the module checked (default numpy); torch and jax are also compared with the NumPy module; all: each",
    )
    sub.set_defaults(run=runs["check"])

    sub = commands.add_parser("analyze", help="measure and plot gradient flow through time", **documented)
    sub.add_argument("model", help=model_help)
    sub.add_argument(
        "--steps",
        type=positive,
        default=analysis.STEPS,
        metavar="T",
        help=f"sequence length (default {analysis.STEPS})",
    )
    sub.add_argument("--seed", type=seed, default=0, metavar="S", help="random seed (default 0)")
    sub.add_argument(
        "--radius",
        type=radii,
        metavar="r1,r2,...",
        help="spectral radii to scale the recurrent weights to (default {}, and a larger one where the gradient "
        "grows if it grows at none of them)".format(",".join(map(str, analysis.RADII))),
    )
    sub.add_argument(
        "--g-max",
        type=positive_number,
        metavar="G",
        help="the clipping threshold g_max (default: between the smallest and the largest measured norm)",
    )
    sub.add_argument(
        "--scale",
        type=positive_number,
        metavar="S",
        help="multiply the cell's input weights and biases by S (default: a power of ten that keeps every state "
        "within 0.01 of its value at zero input, where tanh and the sigmoid are nearly linear; 1: the module's "
        "own initialisation, where they saturate)",
    )
    sub.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="write a PNG plot and a CSV file per table into DIR, made if its parent exists (needs bptt[plots])",
    )
    sub.add_argument("--csv", action="store_true", help="print the tables as CSV, each after a line '# name: title'")
    sub.set_defaults(run=runs["analyze"])
    sub = commands.add_parser(
        "bench", help="time the generated module against NumPy, PyTorch and JAX peers on one core", **documented
    )
    sub.add_argument("model", help=model_help)
    sub.add_argument("--sizes", metavar="d=28,h=32,...", help="model sizes (default 32 each)")
    sub.add_argument("--steps", type=positive, default=35, metavar="T", help="sequence length (default 35)")
    sub.add_argument(
        "--batch",
        type=positive,
        metavar="B",
        help=f"batch size (default {BENCH_BATCH}; with --lengths 5,3,1: their count)",
    )
    sub.add_argument(
        "--dtype",
        type=choices(("float64", "float32"), "dtypes"),
        default=["float64", "float32"],
        help="dtypes (default both)",
    )
    sub.add_argument(
        "--repeats", type=positive, default=7, metavar="R", help="timed rounds, median reported (default 7)"
    )
    sub.add_argument(
        "--peers",
        type=_peers,
        help="peers (default: naive, hand, torch, jax; with --backend torch: numpy, torch; jax: numpy, jax)",
    )
    sub.add_argument(
        "--backend",
        choices=tuple(BACKENDS),
        default=reference().name,
        help="time the module generated for this framework (default numpy) against that framework's own",
    )
    sub.add_argument(
        "--checkpoints",
        metavar="s1,s2,...",
        help="time loss_and_grads in bounded memory with each budget (slots, or bytes such as 32MiB) against full BPTT",
    )
    sub.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="with --checkpoints: write checkpoints.png and .csv into DIR (bptt[plots])",
    )
    sub.add_argument(
        "--lengths",
        type=lengths,
        metavar="5,3,1",
        help="time loss_and_grads with lengths= against without: the given lengths (the batch's size), T (every "
        "sequence T steps) or random (drawn from 1..T for each of --batch sequences)",
    )
    sub.set_defaults(run=runs["bench"])

    sub = commands.add_parser(
        "exercises", help="write exercises with checked solutions: a problem sheet and a solution sheet", **documented
    )
    sub.add_argument("model", help=model_help)
    sub.add_argument("--seed", type=seed, default=0, metavar="S", help="the first instance's seed (default 0)")
    sub.add_argument(
        "--count", type=positive, default=1, metavar="N", help="instances, seeds S, S+1, ... (default 1, at most 100)"
    )
    sub.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="write MODEL-S-problems.tex and MODEL-S-solutions.tex (.md) per instance into DIR, made if its parent "
        "exists (default: both sheets to standard output)",
    )
    sub.add_argument("--format", choices=("tex", "md"), default="tex", help="LaTeX (default) or Markdown")
    sub.set_defaults(run=runs["exercises"])
    return top
