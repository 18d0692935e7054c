"""`python -m bptt` is the `bptt` command."""

import sys

from bptt.codegen.cli import main

sys.exit(main())
