"""What a printer has printed a reference to: the names the printed body must bind or carry."""

from dataclasses import dataclass, field, fields


@dataclass
class Used:
    """The names a printer records as it prints; a body binds them at its top (bindings.py)."""

    params: set = field(default_factory=set)  # parameters read (W_hh), stacked weights (ir.Stack) among them
    sizes: set = field(default_factory=set)  # sizes as the maths names them ("h", "T", "B"; "dtype" for JAX)
    arrays: set = field(default_factory=set)  # arrays read or written: sequences, adjoints, work and scratch
    helpers: set = field(default_factory=set)  # the module's helper functions called (_softmax)

    def __or__(self, other):
        """Every name either recorded."""
        return Used(*(getattr(self, f.name) | getattr(other, f.name) for f in fields(self)))
