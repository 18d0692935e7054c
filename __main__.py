"""`python -m bptt` is the `bptt` command."""

from bptt.app.start import run

run()
