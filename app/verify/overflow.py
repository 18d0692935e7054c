"""The error of a forward pass that overflows, apart from problem.py (which raises it) so that the CLI's guard
catches it without importing NumPy: `bptt latex` draws and prints with the standard library alone."""


class NonFiniteForward(Exception):
    """The forward pass overflowed: finite differences of it would be meaningless."""
