"""`python -m bptt` is the `bptt` command."""

from bptt.codegen.start import run

run()
