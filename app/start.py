"""The `bptt` command's entry point, light to import: a Ctrl-C while the CLI's modules load (SymPy,
NumPy, Jinja2: about a second) exits 130 quietly, as one while it runs does (cli.main)."""

import sys


def run():
    """Load the CLI and run it; exit with its status."""
    try:
        from bptt.app.cli import main
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(main())
