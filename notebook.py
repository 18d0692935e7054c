"""The notebook API, `from bptt.notebook import analyze, derive`: it lives in bptt.app.notebook."""

from bptt.app.notebook import analyze, derive

__all__ = ["analyze", "derive"]
