"""The `bptt` command's entry point, light to import: a Ctrl-C while the CLI's modules load (SymPy,
NumPy, Jinja2: about a second) exits 130 quietly, as one while it runs does (cli.main).

`bptt check` runs with one thread for every library (bench's THREADS) unless the user set one: it differences small
arrays (its sizes, its layouts' sets at most 64 units wide), where a BLAS thread per core only waits, spinning, and
a vector's finite check (BLAS's dot) takes a hundred times longer; one thread halves its CPU time (`bptt check lstm
--steps 200`: 5.9 against 2.3 CPU-s, measured). Set before NumPy loads BLAS."""

import os
import sys


def one_thread(argv, environ):
    """For `bptt check` (argv: the command's arguments), each of THREADS not already in environ set there."""
    if argv[:1] == ["check"]:
        from bptt.app.bench.measuring import THREADS  # the standard library's modules only

        for name, value in THREADS.items():
            environ.setdefault(name, value)


def run():
    """Load the CLI and run it; exit with its status."""
    try:
        one_thread(sys.argv[1:], os.environ)
        from bptt.app.cli import main
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(main())
